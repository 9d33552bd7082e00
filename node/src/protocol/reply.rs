//! Reply encoding for RESP2 and RESP3.
//!
//! Commands write replies through `Reply`, which knows the connection's
//! protocol version and downgrades RESP3-only types (maps, sets, doubles,
//! booleans, pushes, verbatim strings) to their RESP2 shapes exactly as
//! Redis does.

use std::io::Write;

/// An error reply's text. Bytes, not only `str`: Redis echoes client bytes
/// in some errors (a protocol error's offending byte, an unknown command's
/// arguments) as they are, UTF-8 or not.
pub trait ErrorText {
    fn text(&self) -> &[u8];
}

impl ErrorText for str {
    fn text(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl ErrorText for String {
    fn text(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl ErrorText for std::borrow::Cow<'_, str> {
    fn text(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl ErrorText for [u8] {
    fn text(&self) -> &[u8] {
        self
    }
}

impl ErrorText for Vec<u8> {
    fn text(&self) -> &[u8] {
        self
    }
}

/// The output buffer of one connection plus its protocol version.
#[derive(Debug)]
pub struct Reply {
    pub buf: Vec<u8>,
    pub resp3: bool,
}

impl Reply {
    pub fn new(resp3: bool) -> Self {
        Reply { buf: Vec::with_capacity(16 * 1024), resp3 }
    }

    #[inline]
    fn header(&mut self, prefix: u8, n: i64) {
        self.buf.push(prefix);
        let mut b = itoa_buf();
        let s = fmt_i64(&mut b, n);
        self.buf.extend_from_slice(s);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`
    #[inline]
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A simple string; `s` must not contain CR or LF.
    #[inline]
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error; `msg` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    /// Newlines are replaced by spaces, as Redis does, so the frame stays valid.
    pub fn error(&mut self, msg: &(impl ErrorText + ?Sized)) {
        let text = msg.text();
        self.buf.reserve(text.len() + 3);
        self.buf.push(b'-');
        if text.iter().any(|&b| b == b'\r' || b == b'\n') {
            self.buf.extend(text.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
        } else {
            self.buf.extend_from_slice(text);
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    #[inline]
    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }

    #[inline]
    pub fn bulk(&mut self, data: &[u8]) {
        self.header(b'$', data.len() as i64);
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }

    /// A bulk string holding the decimal form of `n` (e.g. INCRBY's reply is an
    /// integer, but HGET of an integer-encoded field is a bulk).
    pub fn bulk_i64(&mut self, n: i64) {
        let mut b = itoa_buf();
        let s = fmt_i64(&mut b, n);
        let s = s.to_vec();
        self.bulk(&s);
    }

    /// The null bulk string: `$-1` (RESP2) or `_` (RESP3).
    #[inline]
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The null array: `*-1` (RESP2) or `_` (RESP3).
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    #[inline]
    pub fn array(&mut self, len: usize) {
        self.header(b'*', len as i64);
    }

    /// A map of `len` pairs; RESP2 sees a flat array of 2*len elements.
    pub fn map(&mut self, len: usize) {
        if self.resp3 {
            self.header(b'%', len as i64);
        } else {
            self.header(b'*', 2 * len as i64);
        }
    }

    /// A set of `len` elements; RESP2 sees an array.
    pub fn set(&mut self, len: usize) {
        if self.resp3 {
            self.header(b'~', len as i64);
        } else {
            self.header(b'*', len as i64);
        }
    }

    /// An out-of-band push (pub/sub messages); RESP2 sees an array.
    pub fn push(&mut self, len: usize) {
        if self.resp3 {
            self.header(b'>', len as i64);
        } else {
            self.header(b'*', len as i64);
        }
    }

    /// A double: RESP3 `,` type, RESP2 a bulk string, both formatted like
    /// Redis 7.0's `addReplyDouble` (`%.17g`, `inf`, `-inf`).
    pub fn double(&mut self, d: f64) {
        let s = format_double(d);
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    /// A boolean: RESP3 `#t`/`#f`, RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, b: bool) {
        if self.resp3 {
            self.buf.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.int(b as i64);
        }
    }

    /// A verbatim string (INFO, CLIENT LIST): RESP3 `=` with `txt:`, RESP2 bulk.
    pub fn verbatim(&mut self, text: &[u8]) {
        if self.resp3 {
            self.header(b'=', text.len() as i64 + 4);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// Appends already-encoded bytes (e.g. a reply built elsewhere).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops everything after `mark` (used to discard a partial reply).
    pub fn truncate(&mut self, mark: usize) {
        self.buf.truncate(mark);
    }
}

type ItoaBuf = [u8; 20];

#[inline]
fn itoa_buf() -> ItoaBuf {
    [0u8; 20]
}

/// Formats an i64 into the end of `buf` without allocating.
#[inline]
fn fmt_i64(buf: &mut ItoaBuf, n: i64) -> &[u8] {
    let mut i = buf.len();
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Formats like C's `printf("%.17g", d)`, which Redis 7.0 uses for doubles
/// in replies (ZSCORE, ZINCRBY, RESP3 doubles): 17 significant digits,
/// trailing zeros dropped, exponent form for very large or small values.
pub fn format_double(d: f64) -> String {
    format_g(d, 17)
}

/// C's `%.<prec>g` for finite and infinite values (`inf`, `-inf`, `nan`).
pub fn format_g(d: f64, prec: usize) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let prec = prec.max(1);
    // Scientific form with prec significant digits tells us the exponent.
    let sci = format!("{:.*e}", prec - 1, d);
    let (mantissa, exp) = sci.split_once('e').expect("e in scientific format");
    let exp: i32 = exp.parse().expect("exponent");
    if exp < -4 || exp >= prec as i32 {
        let mantissa = strip_zeros(mantissa);
        let mut out = String::with_capacity(24);
        out.push_str(&mantissa);
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(StringWriter(&mut out), "{:02}", exp.abs());
        out
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, d))
    }
}

fn strip_zeros(s: &str) -> String {
    if s.contains('.') {
        let t = s.trim_end_matches('0');
        t.trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

struct StringWriter<'a>(&'a mut String);

impl std::io::Write for StringWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push_str(std::str::from_utf8(buf).map_err(std::io::Error::other)?);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_17g_matches_c() {
        // Values checked against printf("%.17g") in C.
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-2.25), "-2.25");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.0e-5), "1.0000000000000001e-05");
        assert_eq!(format_double(123456789.0), "123456789");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_g(0.0001, 17), "0.0001");
    }

    #[test]
    fn resp2_and_resp3_shapes() {
        let mut r = Reply::new(false);
        r.map(1);
        r.null();
        r.double(2.5);
        r.boolean(true);
        assert_eq!(r.buf, b"*2\r\n$-1\r\n$3\r\n2.5\r\n:1\r\n");
        let mut r = Reply::new(true);
        r.map(1);
        r.null();
        r.double(2.5);
        r.boolean(true);
        assert_eq!(r.buf, b"%1\r\n_\r\n,2.5\r\n#t\r\n");
    }

    #[test]
    fn ints_and_errors() {
        let mut r = Reply::new(false);
        r.int(i64::MIN);
        r.int(0);
        r.error("ERR bad\r\nthing");
        assert_eq!(r.buf, b":-9223372036854775808\r\n:0\r\n-ERR bad  thing\r\n");
    }
}
