//! Incremental, zero-copy RESP request parser.
//!
//! A request is either a multibulk array of bulk strings (what every client
//! library sends) or an inline command (`PING\r\n`, typed by hand into
//! telnet or sent by `redis-cli` for some commands). The parser never copies
//! argument bytes: it returns offsets into the caller's read buffer, so the
//! connection can execute every complete frame in the buffer and only then
//! drop the consumed prefix.

use crate::base::parse_i64;
use smallvec::SmallVec;

/// Limits that protect the server from hostile or broken clients.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `proto-max-bulk-len`: the largest bulk string accepted.
    pub max_bulk_len: usize,
    /// Largest number of arguments in one multibulk request.
    pub max_multibulk_len: usize,
    /// Largest inline request line (Redis: PROTO_INLINE_MAX_SIZE, 64 KiB).
    pub max_inline_len: usize,
    /// Clients that have not authenticated yet get much smaller limits,
    /// as in Redis, so an unauthenticated peer cannot make the server buffer much.
    pub unauthenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
        }
    }
}

/// Where one argument lives in the read buffer.
pub type ArgSpan = (u32, u32);

/// One parsed request: the argument spans and the bytes it consumed.
#[derive(Debug, Default)]
pub struct Request {
    pub args: SmallVec<[ArgSpan; 8]>,
    /// Set instead of `args` for an inline request with quotes: unquoting
    /// needs owned bytes. Rare (hand-typed commands), so it may allocate.
    pub owned: Option<Vec<Vec<u8>>>,
    pub consumed: usize,
}

/// Parse outcome for one request at the start of `buf`.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse {
    /// A complete request was written into the `Request`.
    Complete,
    /// More bytes are needed. `hint` is how many bytes the frame needs in
    /// total when known (lets the reader reserve a large bulk in one step).
    Incomplete { hint: usize },
    /// The client violated the protocol; reply with this error and close.
    Error(&'static ProtoError),
}

/// A protocol error's reply text, Redis's byte for byte: the "expected '$'"
/// error quotes the raw offending byte, which need not be UTF-8.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ProtoError(&'static [u8]);

impl ProtoError {
    pub fn as_bytes(&self) -> &'static [u8] {
        self.0
    }
}

impl super::reply::ErrorText for ProtoError {
    fn text(&self) -> &[u8] {
        self.0
    }
}

impl std::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.0))
    }
}

impl std::fmt::Debug for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.0))
    }
}

pub const ERR_MBULK_LEN: &ProtoError = &ProtoError(b"ERR Protocol error: invalid multibulk length");
pub const ERR_BULK_LEN: &ProtoError = &ProtoError(b"ERR Protocol error: invalid bulk length");
pub const ERR_BIG_MBULK: &ProtoError = &ProtoError(b"ERR Protocol error: too big mbulk count string");
pub const ERR_BIG_BULK: &ProtoError = &ProtoError(b"ERR Protocol error: too big bulk count string");
pub const ERR_BIG_INLINE: &ProtoError = &ProtoError(b"ERR Protocol error: too big inline request");
pub const ERR_QUOTES: &ProtoError = &ProtoError(b"ERR Protocol error: unbalanced quotes in request");
pub const ERR_UNAUTH_MBULK: &ProtoError = &ProtoError(b"ERR Protocol error: unauthenticated multibulk length");
pub const ERR_UNAUTH_BULK: &ProtoError = &ProtoError(b"ERR Protocol error: unauthenticated bulk length");

/// Unauthenticated clients: Redis's `ll > 10` and `ll > 16384`.
const UNAUTH_MAX_ARGS: i64 = 10;
const UNAUTH_MAX_BULK: i64 = 16384;

/// Every fixed error text the parser can return (the "expected '$'" family
/// aside, see [`expected_dollar`]).
pub const FIXED_ERRORS: [&ProtoError; 8] = [
    ERR_MBULK_LEN,
    ERR_BULK_LEN,
    ERR_BIG_MBULK,
    ERR_BIG_BULK,
    ERR_BIG_INLINE,
    ERR_QUOTES,
    ERR_UNAUTH_MBULK,
    ERR_UNAUTH_BULK,
];

/// Parses one request at the start of `buf` into `req` (cleared first).
/// Inline requests that are blank lines are skipped: they return `Complete`
/// with no arguments, and the caller just drops the consumed bytes.
pub fn parse_request(buf: &[u8], limits: &Limits, req: &mut Request) -> Parse {
    req.args.clear();
    req.owned = None;
    req.consumed = 0;
    if buf.is_empty() {
        return Parse::Incomplete { hint: 0 };
    }
    if buf[0] == b'*' { parse_multibulk(buf, limits, req) } else { parse_inline(buf, limits, req) }
}

/// True for the command names Redis takes as a cross-protocol attack (an
/// HTTP request's `POST` line or `Host:` header sent to the port): the
/// connection is dropped without a reply (Redis's `securityWarningCommand`).
pub fn is_cross_protocol_attack(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
}

/// Where a header line (`*<n>` or `$<n>`) ends.
enum Line {
    /// Index of its CR.
    Cr(usize),
    Wait,
    TooBig,
}

/// Finds a header's end as Redis does, with `strchr(p, '\r')` over a C
/// string: the first CR, but a NUL before it means "no line" (for as long
/// as the NUL stays). One byte must follow the CR; it is skipped, never
/// checked. `start` is where the header begins: a line that cannot end
/// within `max` bytes of it is an error (also when all of it arrived at
/// once, so the answer does not depend on how the bytes were split).
fn header_end(buf: &[u8], start: usize, max: usize) -> Line {
    let stop = buf[start..].iter().position(|&b| b == b'\r' || b == 0).map(|i| start + i);
    match stop {
        Some(cr) if buf[cr] == b'\r' => {
            if cr - start > max {
                Line::TooBig
            } else if cr + 1 < buf.len() {
                Line::Cr(cr)
            } else {
                Line::Wait
            }
        }
        _ if buf.len() - start > max => Line::TooBig,
        _ => Line::Wait,
    }
}

/// The common header shape, plain digits then CRLF, read in one pass:
/// `(index of the CR, value)`. `None` means "use the general path", which
/// gives the same answer for every header this accepts (digits hold no CR
/// or NUL, a leading zero is left to it, and 18 digits cannot overflow).
#[inline]
fn digits_crlf(buf: &[u8], from: usize) -> Option<(usize, i64)> {
    let mut v: i64 = 0;
    let mut i = from;
    while i < buf.len() && i - from < 18 {
        let c = buf[i];
        if !c.is_ascii_digit() {
            break;
        }
        v = v * 10 + (c - b'0') as i64;
        i += 1;
    }
    let leading_zero = i - from > 1 && buf[from] == b'0';
    let crlf = i > from && !leading_zero && buf.get(i) == Some(&b'\r') && buf.get(i + 1) == Some(&b'\n');
    crlf.then_some((i, v))
}

fn parse_multibulk(buf: &[u8], limits: &Limits, req: &mut Request) -> Parse {
    let (cr, count) = match digits_crlf(buf, 1) {
        Some((cr, v)) => (cr, Some(v)),
        None => match header_end(buf, 0, limits.max_inline_len) {
            Line::Cr(cr) => (cr, parse_i64(&buf[1..cr])),
            Line::Wait => return Parse::Incomplete { hint: 0 },
            Line::TooBig => return Parse::Error(ERR_BIG_MBULK),
        },
    };
    let count = match count {
        Some(n) if n <= limits.max_multibulk_len as i64 => n,
        _ => return Parse::Error(ERR_MBULK_LEN),
    };
    if limits.unauthenticated && count > UNAUTH_MAX_ARGS {
        return Parse::Error(ERR_UNAUTH_MBULK);
    }
    let mut pos = cr + 2;
    if count <= 0 {
        // `*0` and `*-1` are empty requests: consume and ignore them.
        req.consumed = pos;
        return Parse::Complete;
    }
    for _ in 0..count {
        if pos >= buf.len() {
            return Parse::Incomplete { hint: 0 };
        }
        let fast = if buf[pos] == b'$' { digits_crlf(buf, pos + 1) } else { None };
        let (cr, len) = match fast {
            Some((cr, v)) => (cr, Some(v)),
            // Redis checks for the '$' only once the line has ended.
            None => match header_end(buf, pos, limits.max_inline_len) {
                Line::Cr(_) if buf[pos] != b'$' => return Parse::Error(expected_dollar(buf[pos])),
                Line::Cr(cr) => (cr, parse_i64(&buf[pos + 1..cr])),
                Line::Wait => return Parse::Incomplete { hint: 0 },
                Line::TooBig => return Parse::Error(ERR_BIG_BULK),
            },
        };
        let len = match len {
            Some(l) if l >= 0 && l as u64 <= limits.max_bulk_len as u64 => l,
            _ => return Parse::Error(ERR_BULK_LEN),
        };
        if limits.unauthenticated && len > UNAUTH_MAX_BULK {
            return Parse::Error(ERR_UNAUTH_BULK);
        }
        let len = len as usize;
        let start = cr + 2;
        let end = start + len;
        if end + 2 > buf.len() {
            return Parse::Incomplete { hint: end + 2 };
        }
        // Redis skips the two bytes after a bulk without checking them; so do
        // we, or the same request would mean different things to the two.
        if start > u32::MAX as usize || len > u32::MAX as usize {
            return Parse::Error(ERR_BULK_LEN);
        }
        req.args.push((start as u32, len as u32));
        pos = end + 2;
    }
    req.consumed = pos;
    Parse::Complete
}

const DOLLAR_PREFIX: &[u8] = b"ERR Protocol error: expected '$', got '";
const DOLLAR_LEN: usize = DOLLAR_PREFIX.len() + 2;

/// "expected '$', got 'X'" for every byte X, built at compile time so the
/// error path allocates nothing. Redis prints the byte as it is (`%c`).
static EXPECTED_DOLLAR: [[u8; DOLLAR_LEN]; 256] = {
    let mut table = [[0u8; DOLLAR_LEN]; 256];
    let mut b = 0;
    while b < 256 {
        let mut i = 0;
        while i < DOLLAR_PREFIX.len() {
            table[b][i] = DOLLAR_PREFIX[i];
            i += 1;
        }
        table[b][i] = b as u8;
        table[b][i + 1] = b'\'';
        b += 1;
    }
    table
};

static DOLLAR_ERRORS: [ProtoError; 256] = {
    let mut table = [ProtoError(b""); 256];
    let mut b = 0;
    while b < 256 {
        table[b] = ProtoError(&EXPECTED_DOLLAR[b]);
        b += 1;
    }
    table
};

/// Redis's error for a request argument that is not a bulk string.
pub fn expected_dollar(got: u8) -> &'static ProtoError {
    &DOLLAR_ERRORS[got as usize]
}

/// Inline command: whitespace-separated words on one line, with Redis's
/// quoting rules (`"a b"`, `'c'`, `"\x41\n"`).
fn parse_inline(buf: &[u8], limits: &Limits, req: &mut Request) -> Parse {
    // Redis's `strchr(p, '\n')` stops at a NUL: no line until it is gone.
    let stop = buf.iter().position(|&b| b == b'\n' || b == 0);
    let nl = match stop {
        Some(nl) if buf[nl] == b'\n' => nl,
        _ if buf.len() > limits.max_inline_len => return Parse::Error(ERR_BIG_INLINE),
        _ => return Parse::Incomplete { hint: 0 },
    };
    if nl > limits.max_inline_len {
        return Parse::Error(ERR_BIG_INLINE);
    }
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' { nl - 1 } else { nl };
    let line = &buf[..line_end];
    req.consumed = nl + 1;
    if line.iter().any(|&b| b == b'"' || b == b'\'') {
        return match split_quoted(line) {
            Some(words) => {
                req.owned = Some(words);
                Parse::Complete
            }
            None => Parse::Error(ERR_QUOTES),
        };
    }
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && is_c_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let start = i;
        while i < line.len() && !ends_word(line[i]) {
            i += 1;
        }
        req.args.push((start as u32, (i - start) as u32));
    }
    Parse::Complete
}

/// C's `isspace`, which Redis's splitting uses (unlike Rust's ASCII
/// whitespace, it includes vertical tab).
#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What ends an unquoted word in `sdssplitargs`: a shorter set than the
/// `isspace` that skips blanks between words, so "a\x0bb" is one word.
#[inline]
fn ends_word(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// `sdssplitargs`: Redis's quoting rules for inline commands and config files.
pub fn split_quoted(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Redis splits a C string: a NUL byte ends the input.
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && hex_val(line[i + 2]).is_some()
                    && hex_val(line[i + 3]).is_some()
                {
                    cur.push(hex_val(line[i + 2]).unwrap() * 16 + hex_val(line[i + 3]).unwrap());
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    c if ends_word(c) => {
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> (Parse, Vec<Vec<u8>>, usize) {
        let mut req = Request::default();
        let p = parse_request(buf, &Limits::default(), &mut req);
        let args = req.args.iter().map(|&(s, l)| buf[s as usize..(s + l) as usize].to_vec()).collect();
        (p, args, req.consumed)
    }

    #[test]
    fn multibulk_complete_and_pipelined() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        let (p, args, used) = parse(buf);
        assert_eq!(p, Parse::Complete);
        assert_eq!(args, vec![b"GET".to_vec(), b"k".to_vec()]);
        let (p, args, _) = parse(&buf[used..]);
        assert_eq!(p, Parse::Complete);
        assert_eq!(args, vec![b"PING".to_vec()]);
    }

    #[test]
    fn quoted_inline_is_owned() {
        let mut req = Request::default();
        let p = parse_request(b"SET k \"a b\"\r\n", &Limits::default(), &mut req);
        assert_eq!(p, Parse::Complete);
        assert!(req.args.is_empty());
        assert_eq!(req.owned.unwrap()[2], b"a b".to_vec());
    }

    #[test]
    fn multibulk_incomplete_at_every_split() {
        let buf = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        for cut in 0..buf.len() {
            let (p, _, _) = parse(&buf[..cut]);
            assert!(matches!(p, Parse::Incomplete { .. }), "cut {cut}: {p:?}");
        }
        assert_eq!(parse(buf).0, Parse::Complete);
    }

    #[test]
    fn header_fast_path_agrees_with_general_path() {
        let headers: [&[u8]; 14] = [
            b"3\r\n",
            b"0\r\n",
            b"007\r\n",
            b"00\r\n",
            b"123456789012345678\r\n",
            b"1234567890123456789\r\n",
            b"-1\r\n",
            b"+5\r\n",
            b"5\rx\r\n",
            b"5\n",
            b"5\r",
            b"\r\n",
            b"12a\r\n",
            b"1\0\r\n",
        ];
        for h in headers {
            let general = match header_end(h, 0, 64 * 1024) {
                Line::Cr(cr) => Some((cr, parse_i64(&h[..cr]))),
                _ => None,
            };
            if let Some((cr, v)) = digits_crlf(h, 0) {
                assert_eq!(general, Some((cr, Some(v))), "{:?}", String::from_utf8_lossy(h));
            }
        }
        // Shapes the fast path must leave to the general path.
        assert_eq!(digits_crlf(b"3\r\n", 0), Some((1, 3)));
        assert_eq!(digits_crlf(b"0\r\n", 0), Some((1, 0)));
        assert_eq!(digits_crlf(b"04\r\n", 0), None);
        assert_eq!(digits_crlf(b"-1\r\n", 0), None);
        assert_eq!(digits_crlf(b"1234567890123456789\r\n", 0), None);
        assert_eq!(digits_crlf(b"5\r", 0), None);
        // Redis ends a header at the first CR and skips the byte after it.
        assert_eq!(parse(b"*1\rx$4\r\nPING\r\n").1, vec![b"PING".to_vec()]);
        assert_eq!(parse(b"*-1\r\n").0, Parse::Complete);
    }

    #[test]
    fn lengths_follow_string2ll() {
        for ok in [&b"0"[..], b"1", b"-1", b"10", b"9223372036854775807", b"-9223372036854775808"] {
            assert!(parse_i64(ok).is_some(), "{:?}", String::from_utf8_lossy(ok));
        }
        for bad in
            [&b""[..], b"-", b"-0", b"00", b"01", b"+1", b" 1", b"1 ", b"9223372036854775808", b"123456789012345678901"]
        {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn bad_lengths_are_errors() {
        assert_eq!(parse(b"*x\r\n").0, Parse::Error(ERR_MBULK_LEN));
        assert_eq!(parse(b"*01\r\n$4\r\nPING\r\n").0, Parse::Error(ERR_MBULK_LEN));
        assert_eq!(parse(b"*-0\r\n").0, Parse::Error(ERR_MBULK_LEN));
        assert_eq!(parse(b"*2147483648\r\n").0, Parse::Error(ERR_MBULK_LEN));
        assert_eq!(parse(b"*-9223372036854775808\r\n").0, Parse::Complete);
        assert_eq!(parse(b"*1\r\n$04\r\nPING\r\n").0, Parse::Error(ERR_BULK_LEN));
        assert_eq!(parse(b"*1\r\n$-0\r\n").0, Parse::Error(ERR_BULK_LEN));
        assert_eq!(parse(b"*1\r\n$-5\r\n").0, Parse::Error(ERR_BULK_LEN));
        assert_eq!(parse(b"*1\r\n$999999999999\r\n").0, Parse::Error(ERR_BULK_LEN));
        assert_eq!(parse(b"*1\r\n:5\r\n").0, Parse::Error(expected_dollar(b':')));
        assert_eq!(expected_dollar(b':').as_bytes(), b"ERR Protocol error: expected '$', got ':'");
        assert_eq!(expected_dollar(0xff).as_bytes(), b"ERR Protocol error: expected '$', got '\xff'");
        // No line yet: Redis waits for the CR before looking at the '$'.
        assert!(matches!(parse(b"*1\r\n:5").0, Parse::Incomplete { .. }));
        // A NUL hides the CR after it, as from `strchr`.
        assert!(matches!(parse(b"*1\0\r\n").0, Parse::Incomplete { .. }));
        assert!(matches!(parse(b"PI\0NG\r\n").0, Parse::Incomplete { .. }));
    }

    #[test]
    fn huge_declared_bulk_reports_hint_without_allocating() {
        let (p, _, _) = parse(b"*1\r\n$536870912\r\n");
        assert_eq!(p, Parse::Incomplete { hint: 16 + 536870912 + 2 });
        let (p, _, _) = parse(b"*1\r\n$536870913\r\n");
        assert_eq!(p, Parse::Error(ERR_BULK_LEN));
    }

    #[test]
    fn unauthenticated_limits() {
        let limits = Limits { unauthenticated: true, ..Limits::default() };
        let mut req = Request::default();
        assert_eq!(parse_request(b"*11\r\n", &limits, &mut req), Parse::Error(ERR_UNAUTH_MBULK));
        assert_eq!(parse_request(b"*1\r\n$16385\r\n", &limits, &mut req), Parse::Error(ERR_UNAUTH_BULK));
        assert!(matches!(parse_request(b"*10\r\n$16384\r\n", &limits, &mut req), Parse::Incomplete { .. }));
        // Malformed counts are still "invalid", as Redis checks that first.
        assert_eq!(parse_request(b"*011\r\n", &limits, &mut req), Parse::Error(ERR_MBULK_LEN));
    }

    #[test]
    fn inline_commands() {
        let (p, args, used) = parse(b"SET  k   v\r\nGET k\r\n");
        assert_eq!(p, Parse::Complete);
        assert_eq!(args, vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
        assert_eq!(used, 12);
        let (p, args, _) = parse(b"PING\n");
        assert_eq!(p, Parse::Complete);
        assert_eq!(args, vec![b"PING".to_vec()]);
        assert!(matches!(parse(b"PING").0, Parse::Incomplete { .. }));
    }

    #[test]
    fn random_input_never_loops_or_explodes() {
        // Every outcome must be bounded by the input: no more arguments than
        // bytes, progress on every complete parse.
        let mut seed = 0x9E37_79B9_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..3000 {
            let len = (next() % 300) as usize;
            let mut buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Bias some inputs towards the interesting bytes.
            for b in buf.iter_mut() {
                match next() % 12 {
                    0 => *b = b'\n',
                    1 => *b = b'"',
                    2 => *b = b'\'',
                    3 => *b = 0,
                    4 => *b = b' ',
                    _ => {}
                }
            }
            if round % 3 == 0 {
                buf.insert(0, b'*');
            }
            let mut req = Request::default();
            let mut pos = 0;
            while pos < buf.len() {
                match parse_request(&buf[pos..], &Limits::default(), &mut req) {
                    Parse::Complete => {
                        assert!(req.consumed > 0, "no progress on {buf:?}");
                        let n = req.owned.as_ref().map_or(req.args.len(), |o| o.len());
                        assert!(n <= req.consumed, "{n} args from {} bytes", req.consumed);
                        pos += req.consumed;
                    }
                    _ => break,
                }
            }
        }
    }

    #[test]
    fn inline_quotes() {
        assert_eq!(
            split_quoted(br#"set "a b" 'c d' "\x41\n""#).unwrap(),
            vec![b"set".to_vec(), b"a b".to_vec(), b"c d".to_vec(), b"A\n".to_vec()]
        );
        assert!(split_quoted(br#"set "abc"#).is_none());
        assert!(split_quoted(br#"set "a"b"#).is_none());
        assert_eq!(split_quoted(b"a\0b c").unwrap(), vec![b"a".to_vec()], "NUL ends the line as in C");
        assert_eq!(parse(b"set \"x\r\n").0, Parse::Error(ERR_QUOTES));
        // Vertical tab and form feed separate words but do not end one.
        let words = vec![b"a\x0bb".to_vec(), b"c\x0b".to_vec(), b"d\x0c".to_vec()];
        assert_eq!(split_quoted(b"a\x0bb \x0cc\x0b d\x0c").unwrap(), words);
        assert_eq!(parse(b"a\x0bb \x0cc\x0b d\x0c\r\n").1, words);
    }
}
