//! C's `strtod`, and the ways Redis reads a double with it: a score
//! argument (`getDoubleFromObject`: the whole string), a SORT weight and a
//! range bound (up to the end of the C string). Shared by the sorted-set,
//! SORT and geo commands.

/// What C's `strtod` makes of a byte string.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strtod {
    pub value: f64,
    /// Bytes consumed; 0 when no number was found.
    pub len: usize,
    /// ERANGE that Redis rejects: overflow to ±inf, or underflow to zero.
    pub range_error: bool,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ic(s: &[u8], prefix: &str) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn digits_len(s: &[u8], hex: bool) -> usize {
    s.iter().take_while(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() }).count()
}

/// C's `strtod`: leading spaces, sign, `inf`/`infinity`/`nan`, hexadecimal
/// (`0x1.8p3`) and decimal forms; stops at the first byte that doesn't fit.
pub fn strtod(s: &[u8]) -> Strtod {
    const NO_NUMBER: Strtod = Strtod { value: 0.0, len: 0, range_error: false };
    let mut i = s.iter().take_while(|&&b| is_c_space(b)).count();
    let mut neg = false;
    if let Some(&c) = s.get(i) {
        if c == b'+' || c == b'-' {
            neg = c == b'-';
            i += 1;
        }
    }
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i..];
    if starts_with_ic(rest, "inf") {
        let n = if starts_with_ic(rest, "infinity") { 8 } else { 3 };
        return Strtod { value: sign(f64::INFINITY), len: i + n, range_error: false };
    }
    if starts_with_ic(rest, "nan") {
        let mut n = 3;
        if rest.get(3) == Some(&b'(') {
            let inner = rest[4..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
            if rest.get(4 + inner) == Some(&b')') {
                n = 5 + inner;
            }
        }
        return Strtod { value: f64::NAN, len: i + n, range_error: false };
    }
    if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        let body = &rest[2..];
        let int = digits_len(body, true);
        let frac = if body.get(int) == Some(&b'.') { digits_len(&body[int + 1..], true) } else { 0 };
        if int + frac > 0 {
            let (value, len) = parse_hex_float(body, int, frac);
            let nonzero = body[..len].iter().take(int + frac + 1).any(|b| b.is_ascii_hexdigit() && *b != b'0');
            let range_error = value.is_infinite() || (value == 0.0 && nonzero);
            return Strtod { value: sign(value), len: i + 2 + len, range_error };
        }
    }
    let int = digits_len(rest, false);
    let mut end = int;
    let mut frac = 0;
    if rest.get(end) == Some(&b'.') {
        frac = digits_len(&rest[end + 1..], false);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        return NO_NUMBER;
    }
    let mantissa_end = end;
    if let Some(&e) = rest.get(end) {
        if (e | 0x20) == b'e' {
            let mut j = end + 1;
            if matches!(rest.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let exp_digits = digits_len(&rest[j..], false);
            if exp_digits > 0 {
                end = j + exp_digits;
            }
        }
    }
    let text = std::str::from_utf8(&rest[..end]).unwrap_or("0");
    let value: f64 = text.parse().unwrap_or(0.0);
    let nonzero = rest[..mantissa_end].iter().any(|b| b.is_ascii_digit() && *b != b'0');
    let range_error = value.is_infinite() || (value == 0.0 && nonzero);
    Strtod { value: sign(value), len: i + end, range_error }
}

/// The hexadecimal float after "0x": `int` integer digits, then `frac`
/// fraction digits after a '.', then an optional binary exponent `p±n`.
/// Returns the (positive) value and the bytes consumed.
fn parse_hex_float(body: &[u8], int: usize, frac: usize) -> (f64, usize) {
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let fraction: &[u8] = if frac > 0 { &body[int + 1..int + 1 + frac] } else { &[] };
    for (k, &b) in body[..int].iter().chain(fraction).enumerate() {
        let d = (b as char).to_digit(16).unwrap_or(0) as u64;
        let in_fraction = k >= int;
        if mantissa >> 56 == 0 {
            mantissa = mantissa * 16 + d;
            if in_fraction {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !in_fraction {
                exp += 4;
            }
        }
    }
    let mut len = int + if body.get(int) == Some(&b'.') { 1 + frac } else { 0 };
    if let Some(&p) = body.get(len) {
        if (p | 0x20) == b'p' {
            let mut j = len + 1;
            let neg = body.get(j) == Some(&b'-');
            if matches!(body.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let n = digits_len(&body[j..], false);
            if n > 0 {
                let e = body[j..j + n].iter().fold(0i64, |acc, &b| (acc * 10 + (b - b'0') as i64).min(1 << 20));
                exp += if neg { -e } else { e };
                len = j + n;
            }
        }
    }
    let mut value = (mantissa | sticky as u64) as f64;
    // Scale in steps so intermediate powers of two stay representable.
    while exp > 0 {
        let step = exp.min(1000);
        value *= 2f64.powi(step as i32);
        exp -= step;
    }
    while exp < 0 {
        let step = (-exp).min(1000);
        value /= 2f64.powi(step as i32);
        exp += step;
    }
    (value, len)
}

/// A score argument (ZADD, ZINCRBY, WEIGHTS) as Redis's
/// `getDoubleFromObject` reads it: the whole string, no spaces, no NaN.
pub fn parse_score(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || is_c_space(arg[0]) {
        return None;
    }
    let r = strtod(arg);
    (r.len == arg.len() && !r.range_error && !r.value.is_nan()).then_some(r.value)
}

/// A SORT weight as Redis reads it: `strtod` up to the end of the C string
/// ("" is 0), ERANGE and NaN rejected.
pub fn parse_sort_weight(arg: &[u8]) -> Option<f64> {
    let r = strtod(arg);
    let ends = r.len == arg.len() || arg[r.len] == 0;
    (ends && !r.range_error && !r.value.is_nan()).then_some(r.value)
}

/// `strtod` up to the end of the C string (an embedded NUL ends it), as
/// range bounds are parsed: spaces before, overflow and "" are accepted.
pub fn parse_c_double(arg: &[u8]) -> Option<f64> {
    let r = strtod(arg);
    let ends = r.len == arg.len() || arg[r.len] == 0;
    (ends && !r.value.is_nan()).then_some(r.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_like_c() {
        let v = |s: &str| strtod(s.as_bytes());
        assert_eq!(v("1.5"), Strtod { value: 1.5, len: 3, range_error: false });
        assert_eq!(v("  -2e3xyz"), Strtod { value: -2000.0, len: 6, range_error: false });
        assert_eq!(v("").len, 0);
        assert_eq!(v("   ").len, 0);
        assert_eq!(v(".5").value, 0.5);
        assert_eq!(v("5.").len, 2);
        assert_eq!(v("1e").len, 1);
        assert_eq!(v("1e+").len, 1);
        assert_eq!(v("-Infinity").value, f64::NEG_INFINITY);
        assert_eq!(v("+inf").len, 4);
        assert!(v("nan").value.is_nan());
        assert_eq!(v("nan(a-b)").len, 3, "only alphanumerics inside nan(...)");
        assert_eq!(v("nan(abc)").len, 8);
        assert_eq!(v("0x10").value, 16.0);
        assert_eq!(v("-0x1.8p1").value, -3.0);
        assert_eq!(v("0x1p-2").value, 0.25);
        assert_eq!(v("0x").len, 1, "just the 0");
        assert_eq!(v("0xg").len, 1);
        assert!(v("1e400").range_error);
        assert!(v("1e-400").range_error);
        assert!(v("0x1p99999").range_error);
        assert!(!v("1e-310").range_error, "denormals are accepted");
        assert!(!v("0e-400").range_error);
        assert!(!v("0.000").range_error);
    }
}
