//! Kubernetes quantities (`"512Mi"`, `"1.5"`, `"500m"`, `"1e9"`) read exactly, without floats.
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource`):
//! `<sign>? <digits>[.<digits>] <suffix>` where the number may also be `<digits>.` or `.<digits>`,
//! and the suffix is a binary SI unit (`Ki` .. `Ei`), a decimal SI unit (`m`, none, `k`, `M`,
//! `G`, `T`, `P`, `E`) or a decimal exponent (`e3`, `E-2`). Fractions round up, as Kubernetes'
//! `Value()` and `MilliValue()` do, so a request is never under-counted.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The largest magnitude a Kubernetes quantity may have (2^63 - 1).
const MAX_QUANTITY: u128 = i64::MAX as u128;

/// Significant digits kept exactly. 20 digits times the largest binary unit (2^60) still fits
/// in a u128; any value with more significant digits left of the point exceeds `MAX_QUANTITY`
/// anyway, and digits dropped to the right only matter for rounding up.
const KEPT_DIGITS: usize = 20;

/// The value of `q` in bytes (its plain value), rounded up to a whole number.
pub fn parse_bytes(q: &Quantity) -> Result<u64, String> {
    parse_scaled(&q.0, 0)
}

/// The value of `q` in thousandths (CPU millicores), rounded up to a whole number.
pub fn parse_millicores(q: &Quantity) -> Result<u64, String> {
    parse_scaled(&q.0, 3)
}

/// `text` times 10^`extra_decimal_exponent`, rounded up.
fn parse_scaled(text: &str, extra_decimal_exponent: i64) -> Result<u64, String> {
    let invalid = || format!("{text:?} is not a Kubernetes quantity (examples: \"512Mi\", \"2Gi\", \"1.5\", \"500m\")");
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = unsigned.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let (int_digits, frac_digits) = number.split_once('.').unwrap_or((number, ""));
    if (int_digits.is_empty() && frac_digits.is_empty()) || frac_digits.contains('.') {
        return Err(invalid());
    }
    let (decimal_exponent, binary_exponent) = parse_suffix(suffix).ok_or_else(invalid)?;

    // value = mantissa * 10^decimal_exponent * 2^binary_exponent (+ a little when `inexact`).
    let significant = int_digits.chars().chain(frac_digits.chars()).skip_while(|&c| c == '0');
    let mut mantissa: u128 = 0;
    let mut kept = 0usize;
    let mut dropped = 0i64;
    let mut inexact = false;
    for digit in significant {
        if kept < KEPT_DIGITS {
            mantissa = mantissa * 10 + u128::from(digit as u8 - b'0');
            kept += 1;
        } else {
            dropped += 1;
            inexact |= digit != '0';
        }
    }
    if mantissa == 0 {
        return Ok(0);
    }
    if negative {
        return Err(format!("{text:?} is negative; use a positive quantity"));
    }
    let overflow = || format!("{text:?} is too large (a Kubernetes quantity is at most 2^63-1)");
    let exponent = decimal_exponent
        .checked_add(extra_decimal_exponent)
        .and_then(|e| e.checked_add(dropped))
        .and_then(|e| e.checked_sub(frac_digits.len() as i64))
        .ok_or_else(overflow)?;
    let scaled = mantissa << binary_exponent;
    let value = if exponent >= 0 {
        let power = u32::try_from(exponent).ok().and_then(|e| 10u128.checked_pow(e)).ok_or_else(overflow)?;
        // Digits were only dropped if there were more than KEPT_DIGITS: far beyond the maximum.
        scaled.checked_mul(power).filter(|_| !inexact).ok_or_else(overflow)?
    } else {
        match u32::try_from(-exponent).ok().and_then(|e| 10u128.checked_pow(e)) {
            Some(divisor) => scaled.div_ceil(divisor) + u128::from(inexact && scaled.is_multiple_of(divisor)),
            // The divisor exceeds u128 and so `scaled`: a positive value below one unit.
            None => 1,
        }
    };
    if value > MAX_QUANTITY {
        return Err(overflow());
    }
    Ok(value as u64)
}

/// The (decimal, binary) exponents a suffix stands for, or `None` for an unknown suffix.
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    let units = match suffix {
        "" => (0, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Exponents beyond i32 are not quantities Kubernetes accepts either.
            (i64::from(exponent.parse::<i32>().ok()?), 0)
        }
    };
    Some(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(text: &str) -> Result<u64, String> {
        parse_bytes(&Quantity(text.to_owned()))
    }

    fn millis(text: &str) -> Result<u64, String> {
        parse_millicores(&Quantity(text.to_owned()))
    }

    #[test]
    fn plain_and_decimal_si() {
        assert_eq!(bytes("0"), Ok(0));
        assert_eq!(bytes("123"), Ok(123));
        assert_eq!(bytes("+7"), Ok(7));
        assert_eq!(bytes("5k"), Ok(5_000));
        assert_eq!(bytes("5M"), Ok(5_000_000));
        assert_eq!(bytes("5G"), Ok(5_000_000_000));
        assert_eq!(bytes("5T"), Ok(5_000_000_000_000));
        assert_eq!(bytes("5P"), Ok(5_000_000_000_000_000));
        assert_eq!(bytes("5E"), Ok(5_000_000_000_000_000_000));
    }

    #[test]
    fn binary_si() {
        assert_eq!(bytes("1Ki"), Ok(1 << 10));
        assert_eq!(bytes("64Mi"), Ok(64 << 20));
        assert_eq!(bytes("3Gi"), Ok(3 << 30));
        assert_eq!(bytes("2Ti"), Ok(2 << 40));
        assert_eq!(bytes("2Pi"), Ok(2 << 50));
        assert_eq!(bytes("7Ei"), Ok(7 << 60));
    }

    #[test]
    fn exponents() {
        assert_eq!(bytes("1e9"), Ok(1_000_000_000));
        assert_eq!(bytes("1E3"), Ok(1_000));
        assert_eq!(bytes("12e+2"), Ok(1_200));
        assert_eq!(bytes("15e-1"), Ok(2));
        assert_eq!(millis("1e-3"), Ok(1));
        assert_eq!(bytes("0e999999"), Ok(0));
        // A tiny positive value still rounds up to one unit.
        assert_eq!(bytes("1e-99"), Ok(1));
    }

    #[test]
    fn fractions_round_up() {
        assert_eq!(bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(bytes("0.5Ki"), Ok(512));
        assert_eq!(bytes(".5k"), Ok(500));
        assert_eq!(bytes("2."), Ok(2));
        assert_eq!(bytes("1.5"), Ok(2));
        assert_eq!(bytes("100m"), Ok(1));
        assert_eq!(bytes("1000m"), Ok(1));
        assert_eq!(bytes("1.0000000000000000000000000001"), Ok(2));
        assert_eq!(bytes("1.0000000000000000000000000000"), Ok(1));
    }

    #[test]
    fn millicores() {
        assert_eq!(millis("500m"), Ok(500));
        assert_eq!(millis("2"), Ok(2_000));
        assert_eq!(millis("0.5"), Ok(500));
        assert_eq!(millis("1.0001"), Ok(1_001));
        assert_eq!(millis("0.1m"), Ok(1));
        assert_eq!(millis("1k"), Ok(1_000_000));
    }

    #[test]
    fn rejects_garbage() {
        for text in [
            "", " 1", "1 ", "Gi", ".", "+", "-", "1..5", "1.5.5", "1gi", "1K", "1KB", "1Mib", "1e", "1e+", "1e1.5",
            "1ee3", "0x10", "1_000", "ten", "1Gi1", "1m1",
        ] {
            let err = bytes(text).expect_err(text);
            assert!(err.contains("is not a Kubernetes quantity"), "{text}: {err}");
        }
    }

    #[test]
    fn rejects_negatives_but_not_negative_zero() {
        assert!(bytes("-1").unwrap_err().contains("negative"));
        assert!(millis("-500m").unwrap_err().contains("negative"));
        assert!(bytes("-0.001Ki").unwrap_err().contains("negative"));
        assert_eq!(bytes("-0"), Ok(0));
    }

    #[test]
    fn rejects_overflow() {
        assert_eq!(bytes("9223372036854775807"), Ok(i64::MAX as u64));
        for text in [
            "9223372036854775808",
            "8Ei",
            "10E",
            "1e19",
            "1e2147483647",
            "123456789012345678901234567890",
            "1e99999999999",
        ] {
            let err = bytes(text).expect_err(text);
            assert!(err.contains("too large") || err.contains("not a Kubernetes quantity"), "{text}: {err}");
        }
        assert!(bytes("8Ei").unwrap_err().contains("too large"));
        assert!(bytes("123456789012345678901234567890").unwrap_err().contains("too large"));
        // In millicores the same quantity is a thousand times larger.
        assert_eq!(bytes("9223372036854775"), Ok(9_223_372_036_854_775));
        assert!(millis("9223372036854776").unwrap_err().contains("too large"));
    }
}
