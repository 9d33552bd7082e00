//! x86-64 `long double` (x87 80-bit extended precision) in software.
//!
//! Redis's INCRBYFLOAT and HINCRBYFLOAT parse with `strtold`, add in long
//! double and print with `%.17Lf`; the 64-bit mantissa is why Redis
//! answers `0.3` to 0.1 + 0.2 and why 1e308 + 1e308 does not overflow.
//! An `f64` cannot reproduce those replies, so this emulates the three
//! operations exactly (round-to-nearest-even, denormals, overflow).

use std::cmp::Ordering;

/// Exponent of the least significant bit of the smallest denormal: 2^-16445.
const MIN_LSB_EXP: i32 = -16445;
/// Finite values are below 2^16384.
const MAX_EXP: i32 = 16384;
/// `MAX_LONG_DOUBLE_CHARS` in Redis: longer inputs are rejected.
const MAX_CHARS: usize = 5 * 1024;

/// A finite or infinite extended-precision value: `mant * 2^exp` (zero when
/// `mant` is 0). NaN is never stored; operations that would make one say so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    inf: bool,
    mant: u64,
    exp: i32,
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble { neg: false, inf: false, mant: 0, exp: 0 };

    pub fn is_infinite(&self) -> bool {
        self.inf
    }

    fn infinity(neg: bool) -> LongDouble {
        LongDouble { neg, inf: true, mant: 0, exp: 0 }
    }

    fn zero(neg: bool) -> LongDouble {
        LongDouble { neg, ..LongDouble::ZERO }
    }

    fn is_zero(&self) -> bool {
        !self.inf && self.mant == 0
    }

    /// Parses like Redis's `string2ld`: the whole input must be a `strtold`
    /// number (decimal, hex float, `inf`/`infinity`), with no leading space;
    /// NaN, overflow and underflow to zero are rejected.
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= MAX_CHARS || s[0].is_ascii_whitespace() || s[0] == 0x0b {
            return None;
        }
        let (neg, rest) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
            return Some(LongDouble::infinity(neg));
        }
        if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
            if let Some(v) = parse_hex(neg, &rest[2..]) {
                return Some(v);
            }
            // "0x" without hex digits: strtold reads just "0" and stops at 'x'.
            return None;
        }
        parse_decimal(neg, rest)
    }

    /// `self + other` rounded to nearest-even; `None` for NaN (inf - inf).
    pub fn checked_add(self, other: LongDouble) -> Option<LongDouble> {
        if self.inf || other.inf {
            if self.inf && other.inf && self.neg != other.neg {
                return None;
            }
            return Some(if self.inf { self } else { other });
        }
        if other.is_zero() {
            return Some(if self.is_zero() { LongDouble::zero(self.neg && other.neg) } else { self });
        }
        if self.is_zero() {
            return Some(other);
        }
        let (a, b) = {
            let (a, b) = (self.normalized(), other.normalized());
            if a.exp >= b.exp { (a, b) } else { (b, a) }
        };
        // 62 spare low bits below the mantissa, plus a sticky ("jam") bit for
        // anything shifted out of b, is enough for exact rounding.
        let wide_a = (a.mant as u128) << 62;
        let wide_b = shift_right_jam((b.mant as u128) << 62, (a.exp - b.exp) as u32);
        let exp = a.exp - 62;
        Some(if a.neg == b.neg {
            round(a.neg, wide_a + wide_b, exp, false)
        } else {
            match wide_a.cmp(&wide_b) {
                Ordering::Equal => LongDouble::ZERO,
                Ordering::Greater => round(a.neg, wide_a - wide_b, exp, false),
                Ordering::Less => round(b.neg, wide_b - wide_a, exp, false),
            }
        })
    }

    fn normalized(self) -> LongDouble {
        let lz = self.mant.leading_zeros();
        LongDouble { mant: self.mant << lz, exp: self.exp - lz as i32, ..self }
    }

    /// `printf("%.17Lf")` with trailing zeros (and a bare '.') removed and
    /// "-0" printed as "0": Redis's `ld2string(.., LD_STR_HUMAN)`. Finite only.
    pub fn to_human_string(&self) -> String {
        let mut out = String::new();
        if self.neg {
            out.push('-');
        }
        if self.exp >= 0 {
            if self.exp <= 64 {
                out.push_str(&((self.mant as u128) << self.exp).to_string());
            } else {
                let mut big = Big::from_u64(self.mant);
                big.shl(self.exp as u32);
                out.push_str(&big.to_decimal());
            }
        } else {
            // value * 10^17 = mant * 10^17 / 2^k, rounded half-even to an integer.
            let k = (-self.exp) as u32;
            let scaled = (self.mant as u128) * 100_000_000_000_000_000u128;
            let q = if k >= 122 {
                0 // below 2^121 / 2^122: less than half a unit
            } else {
                let q = scaled >> k;
                let r = scaled & ((1u128 << k) - 1);
                let half = 1u128 << (k - 1);
                if r > half || (r == half && q & 1 == 1) { q + 1 } else { q }
            };
            let unit = 100_000_000_000_000_000u128;
            let frac = format!("{:017}", q % unit);
            out.push_str(&(q / unit).to_string());
            let frac = frac.trim_end_matches('0');
            if !frac.is_empty() {
                out.push('.');
                out.push_str(frac);
            }
        }
        if out == "-0" {
            out.remove(0);
        }
        out
    }
}

/// Shifts right by `d`, OR-ing every bit shifted out into bit 0.
fn shift_right_jam(x: u128, d: u32) -> u128 {
    match d {
        0 => x,
        1..=127 => (x >> d) | ((x << (128 - d)) != 0) as u128,
        _ => (x != 0) as u128,
    }
}

/// Rounds `m * 2^exp` (plus a nonzero fraction below `m`'s lsb when
/// `sticky`) to extended precision, nearest-even, with denormals and overflow.
fn round(neg: bool, m: u128, exp: i32, sticky: bool) -> LongDouble {
    if m == 0 {
        return LongDouble::zero(neg);
    }
    let lz = m.leading_zeros();
    let (m, exp) = (m << lz, exp - lz as i32);
    // Keep the top 64 bits, fewer when the result is denormal.
    let mut drop = 64u32;
    if exp + 64 < MIN_LSB_EXP {
        drop = (MIN_LSB_EXP - exp).min(200) as u32;
    }
    let q = if drop >= 129 {
        0
    } else {
        let (q, r) = if drop == 128 { (0, m) } else { (m >> drop, m & ((1u128 << drop) - 1)) };
        let half = 1u128 << (drop - 1);
        if r > half || (r == half && (sticky || q & 1 == 1)) { q + 1 } else { q }
    };
    if q == 0 {
        return LongDouble::zero(neg);
    }
    let mut lsb_exp = exp + drop as i32;
    let mut q = q;
    if q >> 64 != 0 {
        q >>= 1;
        lsb_exp += 1;
    }
    let bit_len = 128 - q.leading_zeros() as i32;
    if bit_len + lsb_exp > MAX_EXP {
        return LongDouble::infinity(neg);
    }
    LongDouble { neg, inf: false, mant: q as u64, exp: lsb_exp }
}

/// Rounds a big integer times 2^exp.
fn round_big(neg: bool, n: &Big, exp: i32) -> LongDouble {
    let (top, shift, sticky) = n.top128();
    round(neg, top, exp + shift as i32, sticky)
}

/// `strtold`'s overflow/underflow verdict as Redis applies it: infinity or a
/// nonzero input rounded to zero is an error.
fn finite_nonzero(v: LongDouble) -> Option<LongDouble> {
    if v.inf || v.mant == 0 { None } else { Some(v) }
}

/// Saturating decimal exponent digits; `None` if there are none.
fn parse_exponent(s: &[u8]) -> Option<(i64, usize)> {
    let (neg, mut i) = match s.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let start = i;
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = (v * 10 + (s[i] - b'0') as i64).min(1_000_000_000);
        i += 1;
    }
    if i == start {
        return None;
    }
    Some((if neg { -v } else { v }, i))
}

fn parse_decimal(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let mut digits: Vec<u8> = Vec::with_capacity(s.len());
    let mut exp10: i64 = 0;
    let (mut i, mut any, mut dot) = (0, false, false);
    while i < s.len() {
        match s[i] {
            c @ b'0'..=b'9' => {
                any = true;
                if dot {
                    exp10 -= 1;
                }
                if !(digits.is_empty() && c == b'0') {
                    digits.push(c - b'0');
                }
            }
            b'.' if !dot => dot = true,
            _ => break,
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if i < s.len() && (s[i] | 0x20) == b'e' {
        // An 'e' without digits is not part of the number: trailing garbage.
        let (e, used) = parse_exponent(&s[i + 1..])?;
        exp10 += e;
        i += 1 + used;
    }
    if i != s.len() {
        return None;
    }
    while digits.last() == Some(&0) {
        digits.pop();
        exp10 += 1;
    }
    if digits.is_empty() {
        return Some(LongDouble::zero(neg));
    }
    // The value is in [10^(n-1+exp10), 10^(n+exp10)): settle the far cases
    // (above the max ~1.19e4932, below half the min denormal ~3.6e-4951) early.
    let n = digits.len() as i64;
    if n - 1 + exp10 >= 4933 || n + exp10 <= -4952 {
        return None;
    }
    let mut num = Big::from_decimal_digits(&digits);
    if exp10 >= 0 {
        num.mul_pow10(exp10 as u32);
        return finite_nonzero(round_big(neg, &num, 0));
    }
    let mut den = Big::from_u64(1);
    den.mul_pow10((-exp10) as u32);
    // Scale to a quotient of 66-67 bits, then divide; the remainder is sticky.
    let k = num.bit_len() as i64 - den.bit_len() as i64;
    let shift = 66 - k;
    if shift >= 0 {
        num.shl(shift as u32);
    } else {
        den.shl((-shift) as u32);
    }
    let (q, rem_nonzero) = num.div_small_quotient(&den);
    finite_nonzero(round(neg, q, -shift as i32, rem_nonzero))
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let mut num = Big::from_u64(0);
    let mut exp2: i64 = 0;
    let (mut i, mut any, mut dot) = (0, false, false);
    while i < s.len() {
        match s[i] {
            b'.' if !dot => dot = true,
            c if c.is_ascii_hexdigit() => {
                any = true;
                let d = (c as char).to_digit(16).unwrap_or(0);
                if num.is_zero() && d == 0 {
                    if dot {
                        exp2 -= 4;
                    }
                } else {
                    num.shl(4);
                    num.add_small(d);
                    if dot {
                        exp2 -= 4;
                    }
                }
            }
            _ => break,
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if i < s.len() && (s[i] | 0x20) == b'p' {
        let (e, used) = parse_exponent(&s[i + 1..])?;
        exp2 += e;
        i += 1 + used;
    }
    if i != s.len() {
        return None;
    }
    if num.is_zero() {
        return Some(LongDouble::zero(neg));
    }
    let exp2 = exp2.clamp(-1_000_000, 1_000_000) as i32;
    finite_nonzero(round_big(neg, &num, exp2))
}

/// Just enough unsigned big-integer arithmetic for exact conversions
/// (little-endian 32-bit limbs).
#[derive(Clone, Debug)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn from_decimal_digits(digits: &[u8]) -> Big {
        let mut b = Big(Vec::with_capacity(digits.len() / 9 + 1));
        for chunk in digits.chunks(9) {
            let mut v = 0u32;
            for &d in chunk {
                v = v * 10 + d as u32;
            }
            b.mul_small(10u32.pow(chunk.len() as u32));
            b.add_small(v);
        }
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> u32 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u32 - 1) * 32 + (32 - top.leading_zeros()),
        }
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for limb in self.0.iter_mut() {
            let v = *limb as u64 * m as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = a as u64;
        for limb in self.0.iter_mut() {
            if carry == 0 {
                break;
            }
            let v = *limb as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut n: u32) {
        while n >= 9 {
            self.mul_small(1_000_000_000);
            n -= 9;
        }
        self.mul_small(10u32.pow(n));
    }

    fn shl(&mut self, bits: u32) {
        if self.is_zero() || bits == 0 {
            return;
        }
        let (limbs, rem) = ((bits / 32) as usize, bits % 32);
        if rem != 0 {
            let mut carry = 0u32;
            for limb in self.0.iter_mut() {
                let v = *limb;
                *limb = (v << rem) | carry;
                carry = v >> (32 - rem);
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        if limbs > 0 {
            self.0.splice(0..0, std::iter::repeat_n(0, limbs));
        }
    }

    fn cmp(&self, other: &Big) -> Ordering {
        self.0.len().cmp(&other.0.len()).then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// `self -= other`, with `self >= other`.
    fn sub(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, limb) in self.0.iter_mut().enumerate() {
            let v = *limb as i64 - other.0.get(i).copied().unwrap_or(0) as i64 - borrow;
            borrow = (v < 0) as i64;
            *limb = v.rem_euclid(1 << 32) as u32;
        }
        self.trim();
    }

    /// `self / d` for a quotient known to fit in u128, and whether there is a
    /// remainder. Restoring division, one quotient bit per step.
    fn div_small_quotient(mut self, d: &Big) -> (u128, bool) {
        let k = self.bit_len().saturating_sub(d.bit_len());
        let mut t = d.clone();
        t.shl(k);
        let mut q = 0u128;
        for _ in 0..=k {
            q <<= 1;
            if self.cmp(&t) != Ordering::Less {
                self.sub(&t);
                q |= 1;
            }
            self.shl(1);
        }
        (q, !self.is_zero())
    }

    /// The top 128 bits, how far they were shifted down, and whether any
    /// bit below them is set.
    fn top128(&self) -> (u128, u32, bool) {
        let len = self.bit_len();
        if len <= 128 {
            let mut v = 0u128;
            for &limb in self.0.iter().rev() {
                v = (v << 32) | limb as u128;
            }
            return (v, 0, false);
        }
        let shift = len - 128;
        let bit = |i: u32| (self.0[(i / 32) as usize] >> (i % 32)) & 1;
        let mut v = 0u128;
        for i in (shift..len).rev() {
            v = (v << 1) | bit(i) as u128;
        }
        let sticky = (0..shift).any(|i| bit(i) == 1);
        (v, shift, sticky)
    }

    /// Decimal digits (for integers too large for u128).
    fn to_decimal(&self) -> String {
        let mut limbs = self.0.clone();
        let mut chunks = Vec::new();
        while !limbs.is_empty() {
            let mut rem = 0u64;
            for limb in limbs.iter_mut().rev() {
                let cur = (rem << 32) | *limb as u64;
                *limb = (cur / 1_000_000_000) as u32;
                rem = cur % 1_000_000_000;
            }
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
            chunks.push(rem as u32);
        }
        let mut s = String::new();
        for (i, c) in chunks.iter().rev().enumerate() {
            if i == 0 {
                s.push_str(&c.to_string());
            } else {
                s.push_str(&format!("{c:09}"));
            }
        }
        if s.is_empty() { "0".into() } else { s }
    }
}
