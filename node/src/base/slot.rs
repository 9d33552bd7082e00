//! Redis Cluster hash slots: `CRC16(key) mod 16384`, where a key holding a
//! non-empty `{hash tag}` hashes only the tag, so related keys can be kept
//! in one slot on purpose.

/// Number of hash slots, as in Redis Cluster.
pub const SLOTS: usize = 16384;

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
