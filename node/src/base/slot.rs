//! Redis Cluster hash slots: `CRC16(key) mod 16384`, where a key holding a
//! non-empty `{hash tag}` hashes only the tag, so related keys can be kept
//! in one slot on purpose.

/// Number of hash slots, as in Redis Cluster.
pub const SLOTS: usize = 16384;

/// CRC16-CCITT (XModem: polynomial 0x1021, initial value 0), the variant
/// Redis Cluster uses. Table-driven: one lookup per byte.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize])
}

const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
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
