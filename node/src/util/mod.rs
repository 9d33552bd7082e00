//! Number parsing and formatting with Redis's exact rules.

pub mod long_double;

/// Parses a signed 64-bit integer the way Redis's `string2ll` does: no
/// leading '+', no leading zeros (except "0"), no spaces, no overflow.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s.len() == 1 && s[0] == b'0' {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 { None } else { Some((v as i64).wrapping_neg()) }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Parses a double like Redis's `string2ld`/`strtod` checks: no spaces,
/// accepts "inf"/"-inf"/"+inf", rejects NaN and trailing garbage.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    if s.is_empty() || s.len() > 5120 {
        return None;
    }
    let st = std::str::from_utf8(s).ok()?;
    if st.starts_with(char::is_whitespace) || st.ends_with(char::is_whitespace) {
        return None;
    }
    let lower = st.to_ascii_lowercase();
    match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => return Some(f64::INFINITY),
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    if lower.contains("nan") || lower.contains("inf") {
        return None;
    }
    // Rust accepts forms C's strtod also accepts (e.g. "1e5", ".5", "5.").
    let v: f64 = st.parse().ok()?;
    if v.is_nan() { None } else { Some(v) }
}

/// Parses a SCAN cursor the way Redis's `parseScanCursorOrReply` does with
/// `strtoul`: the argument is a C string (a NUL ends it), the empty string is
/// 0, an optional sign (a negative value wraps around), leading zeros allowed,
/// no leading space, nothing after the digits, no overflow.
pub fn parse_scan_cursor(arg: &[u8]) -> Option<u64> {
    let s = arg.split(|&b| b == 0).next().unwrap_or_default();
    if s.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Case-insensitive ASCII comparison for option keywords.
#[inline]
pub fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Redis's glob-style pattern matching (`stringmatchlen`): `*`, `?`,
/// `[abc]`, `[^a]`, `[a-z]`, and `\` escapes.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    glob_rec(pattern, s, nocase, 0)
}

fn glob_rec(mut p: &[u8], mut s: &[u8], nocase: bool, depth: u32) -> bool {
    // Redis bounds recursion too, against patterns like "*a*a*a*...".
    if depth > 1000 {
        return false;
    }
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    while !p.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for i in 0..=s.len() {
                    if glob_rec(&p[1..], &s[i..], nocase, depth + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if s.is_empty() {
                    return false;
                }
                s = &s[1..];
            }
            b'[' => {
                if s.is_empty() {
                    return false;
                }
                p = &p[1..];
                let not = !p.is_empty() && p[0] == b'^';
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if eq(p[0], s[0]) {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = s[0];
                        let (c, start, end) = if nocase {
                            (c.to_ascii_lowercase(), start.to_ascii_lowercase(), end.to_ascii_lowercase())
                        } else {
                            (c, start, end)
                        };
                        if c >= start && c <= end {
                            matched = true;
                        }
                        p = &p[2..];
                    } else if eq(p[0], s[0]) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
                if p.is_empty() {
                    // Unterminated class: Redis treats the end as the end.
                    return s.is_empty();
                }
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if s.is_empty() || !eq(p[0], s[0]) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if s.is_empty() || !eq(c, s[0]) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while !p.is_empty() && p[0] == b'*' {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_like_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        for bad in [&b"01"[..], b"+1", b" 1", b"1 ", b"", b"-", b"-0", b"1.0", b"abc"] {
            assert_eq!(parse_i64(bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
    }

    #[test]
    fn scan_cursors_like_strtoul() {
        assert_eq!(parse_scan_cursor(b"0"), Some(0));
        assert_eq!(parse_scan_cursor(b""), Some(0));
        assert_eq!(parse_scan_cursor(b"007"), Some(7));
        assert_eq!(parse_scan_cursor(b"+3"), Some(3));
        assert_eq!(parse_scan_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_scan_cursor(b"5\0junk"), Some(5));
        assert_eq!(parse_scan_cursor(b"18446744073709551615"), Some(u64::MAX));
        for bad in [&b"18446744073709551616"[..], b" 1", b"1 ", b"x", b"-", b"1.0"] {
            assert_eq!(parse_scan_cursor(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*:name", b"user:42:mail", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(!glob_match(b"a*a*a*a*a*a*a*a*b", &[b'a'; 40], false));
    }
}
