//! `notify-keyspace-events`: which keyspace notifications are published,
//! as Redis's class flags, parsed from and shown as Redis's letters.

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: keys that expired.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: keys the eviction policy removed.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: a command looked up a missing key (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (accepted and shown; nothing here emits them).
pub const MODULE: u32 = 1 << 13;
/// `n`: a key was created (not part of `A`).
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's error for a letter it does not know.
pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// The flags of a `notify-keyspace-events` value (Redis's
/// `keyspaceEventsStringToFlags`); None for an unknown letter.
pub fn parse(classes: &[u8]) -> Option<u32> {
    classes.iter().try_fold(0, |flags, c| {
        Some(
            flags
                | match c {
                    b'A' => ALL,
                    b'g' => GENERIC,
                    b'$' => STRING,
                    b'l' => LIST,
                    b's' => SET,
                    b'h' => HASH,
                    b'z' => ZSET,
                    b'x' => EXPIRED,
                    b'e' => EVICTED,
                    b'K' => KEYSPACE,
                    b'E' => KEYEVENT,
                    b't' => STREAM,
                    b'm' => KEY_MISS,
                    b'd' => MODULE,
                    b'n' => NEW,
                    _ => return None,
                },
        )
    })
}

/// The canonical letters CONFIG GET shows (Redis's
/// `keyspaceEventsFlagsToString`: `A` hides `n`, as in Redis 7.0).
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        let classes = [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ];
        s.extend(classes.iter().filter(|(f, _)| flags & f != 0).map(|(_, c)| c));
    }
    s.extend(
        [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')].iter().filter(|(f, _)| flags & f != 0).map(|(_, c)| c),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_and_show_as_redis_does() {
        for (given, shown) in [
            ("AKE", "AKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("gxn$Kmd", "g$xdnKm"),
            ("AKEmn", "AKEm"),
            ("An", "A"),
            ("nK", "nK"),
            ("", ""),
        ] {
            assert_eq!(format(parse(given.as_bytes()).unwrap()), shown, "{given}");
        }
        assert_eq!(parse(b"Aq"), None);
        assert_eq!(parse(b"An").unwrap() & NEW, NEW, "shown as A, still on");
    }
}
