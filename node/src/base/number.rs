//! Number parsing and formatting with Redis's exact rules.

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
}
