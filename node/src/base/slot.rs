//! Redis Cluster hash slots: `CRC16(key) mod 16384`, where a key holding a
//! non-empty `{hash tag}` hashes only the tag, so related keys can be kept
//! in one slot on purpose.

/// Number of hash slots, as in Redis Cluster.
pub const SLOTS: usize = 16384;

/// A set of hash slots (a bitmap), written as Redis's ranges are:
/// comma-separated `a-b` or `a` (`0-99,200`).
#[derive(Clone, PartialEq, Eq)]
pub struct SlotSet {
    bits: Box<[u64; SLOTS / 64]>,
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet { bits: Box::new([0; SLOTS / 64]) }
    }
}

impl std::fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotSet({})", self.render())
    }
}

impl SlotSet {
    pub fn from_ranges(ranges: &[(u16, u16)]) -> SlotSet {
        let mut s = SlotSet::default();
        for &(a, b) in ranges {
            for slot in a..=b {
                s.insert(slot);
            }
        }
        s
    }

    /// Parses `a-b,c,...`; `-` or "" is the empty set.
    pub fn parse(text: &str) -> Result<SlotSet, String> {
        let mut s = SlotSet::default();
        if text == "-" || text.is_empty() {
            return Ok(s);
        }
        let slot =
            |t: &str| t.parse::<u16>().ok().filter(|&n| (n as usize) < SLOTS).ok_or_else(|| format!("bad slot '{t}'"));
        for r in text.split(',') {
            let (a, b) = match r.split_once('-') {
                Some((a, b)) => (slot(a)?, slot(b)?),
                None => (slot(r)?, slot(r)?),
            };
            if a > b {
                return Err(format!("bad slot range '{r}'"));
            }
            for n in a..=b {
                s.insert(n);
            }
        }
        Ok(s)
    }

    pub fn insert(&mut self, slot: u16) {
        self.bits[slot as usize / 64] |= 1 << (slot % 64);
    }

    #[inline]
    pub fn contains(&self, slot: u16) -> bool {
        self.bits[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    pub fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..SLOTS as u16).filter(|&s| self.contains(s))
    }

    /// Inclusive ranges, in order.
    pub fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for s in self.iter() {
            match out.last_mut() {
                Some((_, b)) if *b + 1 == s => *b = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    /// The ranges' text form (`-` when empty).
    pub fn render(&self) -> String {
        let r = self.ranges();
        if r.is_empty() {
            return "-".into();
        }
        r.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect::<Vec<_>>().join(",")
    }
}

/// CRC16-CCITT (XModem: polynomial 0x1021, initial value 0), the variant
/// Redis Cluster uses. It runs on every key lookup, so it takes 8 bytes per
/// step ("slicing-by-8"): the 16-bit register only meets the first two
/// bytes of a step, and every byte's table lookup is independent of the
/// others', so the CPU overlaps them instead of waiting byte by byte.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let [hi, lo] = crc.to_be_bytes();
        crc = CRC16_TABLES[7][(hi ^ c[0]) as usize]
            ^ CRC16_TABLES[6][(lo ^ c[1]) as usize]
            ^ CRC16_TABLES[5][c[2] as usize]
            ^ CRC16_TABLES[4][c[3] as usize]
            ^ CRC16_TABLES[3][c[4] as usize]
            ^ CRC16_TABLES[2][c[5] as usize]
            ^ CRC16_TABLES[1][c[6] as usize]
            ^ CRC16_TABLES[0][c[7] as usize];
    }
    chunks.remainder().iter().fold(crc, |crc, &b| (crc << 8) ^ CRC16_TABLES[0][((crc >> 8) as u8 ^ b) as usize])
}

/// `CRC16_TABLES[k][x]`: the CRC of byte `x` followed by `k` zero bytes.
static CRC16_TABLES: [[u16; 256]; 8] = {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            // One more zero byte through the register.
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// The part of a key that decides its slot: the text between the first `{`
/// and the first `}` after it, when that is non-empty; else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The hash slot of a key (0..16384).
#[inline]
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain one-byte-at-a-time CRC the sliced one must equal.
    fn crc16_bytewise(data: &[u8]) -> u16 {
        data.iter().fold(0u16, |crc, &b| {
            let mut crc = crc ^ ((b as u16) << 8);
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            }
            crc
        })
    }

    #[test]
    fn sliced_crc_equals_the_bitwise_definition() {
        let mut x = 0x1234_5678_u64;
        for len in 0..200 {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(crc16(&data), crc16_bytewise(&data), "length {len}");
        }
    }

    #[test]
    fn slot_sets_parse_and_render_ranges() {
        let s = SlotSet::parse("0-3,7,9-10").unwrap();
        assert_eq!(s.len(), 7);
        assert!(s.contains(7) && !s.contains(8));
        assert_eq!(s.render(), "0-3,7,9-10");
        assert_eq!(s.ranges(), vec![(0, 3), (7, 7), (9, 10)]);
        assert!(SlotSet::parse("-").unwrap().is_empty());
        assert!(SlotSet::parse("5-2").is_err() && SlotSet::parse("16384").is_err());
        assert_eq!(SlotSet::from_ranges(&[(16383, 16383)]).render(), "16383");
    }

    #[test]
    fn crc16_check_value() {
        // The XModem check value, also quoted in the Redis Cluster spec.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Values from `CLUSTER KEYSLOT` on a Redis 7 cluster node.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_spec() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}", "an empty first tag: the whole key");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar", "up to the first closing brace");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar", "only the first tag counts");
        assert_eq!(hash_tag(b"no}tag{here"), b"no}tag{here", "a brace pair must open first");
    }
}
