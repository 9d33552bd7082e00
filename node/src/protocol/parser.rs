//! Incremental, zero-copy RESP request parser.
//!
//! A request is either a multibulk array of bulk strings (what every client
//! library sends) or an inline command (`PING\r\n`, typed by hand into
//! telnet or sent by `redis-cli` for some commands). The parser never copies
//! argument bytes: it returns offsets into the caller's read buffer, so the
//! connection can execute every complete frame in the buffer and only then
//! drop the consumed prefix.

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
    Error(&'static str),
}

const ERR_MBULK_LEN: &str = "ERR Protocol error: invalid multibulk length";
const ERR_BULK_LEN: &str = "ERR Protocol error: invalid bulk length";
const ERR_BIG_MBULK: &str = "ERR Protocol error: too big mbulk count string";
const ERR_BIG_BULK: &str = "ERR Protocol error: too big bulk count string";
const ERR_BIG_INLINE: &str = "ERR Protocol error: too big inline request";
const ERR_QUOTES: &str = "ERR Protocol error: unbalanced quotes in request";

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

/// Finds `\r\n` starting at `from`; returns the index of `\r`.
#[inline]
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        match memchr_cr(&buf[i..]) {
            Some(off) => {
                let pos = i + off;
                if pos + 1 < buf.len() && buf[pos + 1] == b'\n' {
                    return Some(pos);
                }
                i = pos + 1;
            }
            None => return None,
        }
    }
    None
}

#[inline]
fn memchr_cr(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'\r')
}

/// Parses a decimal integer the way Redis's `string2ll` does for lengths.
fn parse_len(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

/// The common header shape, plain digits then CRLF, read in one pass:
/// `(index of the CR, value)`. `None` means "use the general path", which
/// gives the same answer for every header this accepts (digits hold no CR,
/// and 18 digits cannot overflow).
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
    let crlf = i > from && buf.get(i) == Some(&b'\r') && buf.get(i + 1) == Some(&b'\n');
    crlf.then_some((i, v))
}

fn parse_multibulk(buf: &[u8], limits: &Limits, req: &mut Request) -> Parse {
    let (nl, count) = match digits_crlf(buf, 1) {
        Some((nl, v)) => (nl, Some(v)),
        None => {
            let Some(nl) = find_crlf(buf, 1) else {
                if buf.len() > limits.max_inline_len {
                    return Parse::Error(ERR_BIG_MBULK);
                }
                return Parse::Incomplete { hint: 0 };
            };
            (nl, parse_len(&buf[1..nl]))
        }
    };
    let Some(count) = count else {
        return Parse::Error(ERR_MBULK_LEN);
    };
    let max_count = if limits.unauthenticated { 10 } else { limits.max_multibulk_len as i64 };
    if count > max_count {
        return Parse::Error(ERR_MBULK_LEN);
    }
    let mut pos = nl + 2;
    if count <= 0 {
        // `*0` and `*-1` are empty requests: consume and ignore them.
        req.consumed = pos;
        return Parse::Complete;
    }
    let max_bulk = if limits.unauthenticated { 16384 } else { limits.max_bulk_len as i64 };
    for _ in 0..count {
        if pos >= buf.len() {
            return Parse::Incomplete { hint: 0 };
        }
        if buf[pos] != b'$' {
            return Parse::Error(expected_dollar(buf[pos]));
        }
        let (nl, len) = match digits_crlf(buf, pos + 1) {
            Some((nl, v)) => (nl, Some(v)),
            None => {
                let Some(nl) = find_crlf(buf, pos + 1) else {
                    if buf.len() - pos > limits.max_inline_len {
                        return Parse::Error(ERR_BIG_BULK);
                    }
                    return Parse::Incomplete { hint: 0 };
                };
                (nl, parse_len(&buf[pos + 1..nl]))
            }
        };
        let len = match len {
            Some(l) if l >= 0 && l <= max_bulk => l as usize,
            _ => return Parse::Error(ERR_BULK_LEN),
        };
        let start = nl + 2;
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

/// Redis reports the offending byte in this error; we keep a static table
/// of messages for printable bytes so the error path allocates nothing.
fn expected_dollar(got: u8) -> &'static str {
    const MSGS: [&str; 95] = {
        // Built at compile time for ' '..='~'.
        [
            "ERR Protocol error: expected '$', got ' '",
            "ERR Protocol error: expected '$', got '!'",
            "ERR Protocol error: expected '$', got '\"'",
            "ERR Protocol error: expected '$', got '#'",
            "ERR Protocol error: expected '$', got '$'",
            "ERR Protocol error: expected '$', got '%'",
            "ERR Protocol error: expected '$', got '&'",
            "ERR Protocol error: expected '$', got '''",
            "ERR Protocol error: expected '$', got '('",
            "ERR Protocol error: expected '$', got ')'",
            "ERR Protocol error: expected '$', got '*'",
            "ERR Protocol error: expected '$', got '+'",
            "ERR Protocol error: expected '$', got ','",
            "ERR Protocol error: expected '$', got '-'",
            "ERR Protocol error: expected '$', got '.'",
            "ERR Protocol error: expected '$', got '/'",
            "ERR Protocol error: expected '$', got '0'",
            "ERR Protocol error: expected '$', got '1'",
            "ERR Protocol error: expected '$', got '2'",
            "ERR Protocol error: expected '$', got '3'",
            "ERR Protocol error: expected '$', got '4'",
            "ERR Protocol error: expected '$', got '5'",
            "ERR Protocol error: expected '$', got '6'",
            "ERR Protocol error: expected '$', got '7'",
            "ERR Protocol error: expected '$', got '8'",
            "ERR Protocol error: expected '$', got '9'",
            "ERR Protocol error: expected '$', got ':'",
            "ERR Protocol error: expected '$', got ';'",
            "ERR Protocol error: expected '$', got '<'",
            "ERR Protocol error: expected '$', got '='",
            "ERR Protocol error: expected '$', got '>'",
            "ERR Protocol error: expected '$', got '?'",
            "ERR Protocol error: expected '$', got '@'",
            "ERR Protocol error: expected '$', got 'A'",
            "ERR Protocol error: expected '$', got 'B'",
            "ERR Protocol error: expected '$', got 'C'",
            "ERR Protocol error: expected '$', got 'D'",
            "ERR Protocol error: expected '$', got 'E'",
            "ERR Protocol error: expected '$', got 'F'",
            "ERR Protocol error: expected '$', got 'G'",
            "ERR Protocol error: expected '$', got 'H'",
            "ERR Protocol error: expected '$', got 'I'",
            "ERR Protocol error: expected '$', got 'J'",
            "ERR Protocol error: expected '$', got 'K'",
            "ERR Protocol error: expected '$', got 'L'",
            "ERR Protocol error: expected '$', got 'M'",
            "ERR Protocol error: expected '$', got 'N'",
            "ERR Protocol error: expected '$', got 'O'",
            "ERR Protocol error: expected '$', got 'P'",
            "ERR Protocol error: expected '$', got 'Q'",
            "ERR Protocol error: expected '$', got 'R'",
            "ERR Protocol error: expected '$', got 'S'",
            "ERR Protocol error: expected '$', got 'T'",
            "ERR Protocol error: expected '$', got 'U'",
            "ERR Protocol error: expected '$', got 'V'",
            "ERR Protocol error: expected '$', got 'W'",
            "ERR Protocol error: expected '$', got 'X'",
            "ERR Protocol error: expected '$', got 'Y'",
            "ERR Protocol error: expected '$', got 'Z'",
            "ERR Protocol error: expected '$', got '['",
            "ERR Protocol error: expected '$', got '\\'",
            "ERR Protocol error: expected '$', got ']'",
            "ERR Protocol error: expected '$', got '^'",
            "ERR Protocol error: expected '$', got '_'",
            "ERR Protocol error: expected '$', got '`'",
            "ERR Protocol error: expected '$', got 'a'",
            "ERR Protocol error: expected '$', got 'b'",
            "ERR Protocol error: expected '$', got 'c'",
            "ERR Protocol error: expected '$', got 'd'",
            "ERR Protocol error: expected '$', got 'e'",
            "ERR Protocol error: expected '$', got 'f'",
            "ERR Protocol error: expected '$', got 'g'",
            "ERR Protocol error: expected '$', got 'h'",
            "ERR Protocol error: expected '$', got 'i'",
            "ERR Protocol error: expected '$', got 'j'",
            "ERR Protocol error: expected '$', got 'k'",
            "ERR Protocol error: expected '$', got 'l'",
            "ERR Protocol error: expected '$', got 'm'",
            "ERR Protocol error: expected '$', got 'n'",
            "ERR Protocol error: expected '$', got 'o'",
            "ERR Protocol error: expected '$', got 'p'",
            "ERR Protocol error: expected '$', got 'q'",
            "ERR Protocol error: expected '$', got 'r'",
            "ERR Protocol error: expected '$', got 's'",
            "ERR Protocol error: expected '$', got 't'",
            "ERR Protocol error: expected '$', got 'u'",
            "ERR Protocol error: expected '$', got 'v'",
            "ERR Protocol error: expected '$', got 'w'",
            "ERR Protocol error: expected '$', got 'x'",
            "ERR Protocol error: expected '$', got 'y'",
            "ERR Protocol error: expected '$', got 'z'",
            "ERR Protocol error: expected '$', got '{'",
            "ERR Protocol error: expected '$', got '|'",
            "ERR Protocol error: expected '$', got '}'",
            "ERR Protocol error: expected '$', got '~'",
        ]
    };
    if (b' '..=b'~').contains(&got) {
        MSGS[(got - b' ') as usize]
    } else {
        "ERR Protocol error: expected '$', got something else"
    }
}

/// Inline command: whitespace-separated words on one line, with Redis's
/// quoting rules (`"a b"`, `'c'`, `"\x41\n"`).
fn parse_inline(buf: &[u8], limits: &Limits, req: &mut Request) -> Parse {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.max_inline_len {
            return Parse::Error(ERR_BIG_INLINE);
        }
        return Parse::Incomplete { hint: 0 };
    };
    if nl > limits.max_inline_len {
        return Parse::Error(ERR_BIG_INLINE);
    }
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' { nl - 1 } else { nl };
    let line = &buf[..line_end];
    req.consumed = nl + 1;
    if line.iter().any(|&b| b == b'"' || b == b'\'' || b == 0) {
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
        while i < line.len() && !is_c_space(line[i]) {
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
                    c if is_c_space(c) => {
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
        let headers: [&[u8]; 12] = [
            b"3\r\n",
            b"0\r\n",
            b"007\r\n",
            b"123456789012345678\r\n",
            b"1234567890123456789\r\n",
            b"-1\r\n",
            b"+5\r\n",
            b"5\rx\r\n",
            b"5\n",
            b"5\r",
            b"\r\n",
            b"12a\r\n",
        ];
        for h in headers {
            let general = find_crlf(h, 0).map(|nl| (nl, parse_len(&h[..nl])));
            if let Some((nl, v)) = digits_crlf(h, 0) {
                assert_eq!(general, Some((nl, Some(v))), "{:?}", String::from_utf8_lossy(h));
            }
        }
        // Shapes the fast path must leave to the general path.
        assert_eq!(digits_crlf(b"3\r\n", 0), Some((1, 3)));
        assert_eq!(digits_crlf(b"-1\r\n", 0), None);
        assert_eq!(digits_crlf(b"1234567890123456789\r\n", 0), None);
        assert_eq!(digits_crlf(b"5\r", 0), None);
        // Whole requests that take the general path still parse as before.
        assert_eq!(parse(b"*1\r\n$0004\r\nPING\r\n").1, vec![b"PING".to_vec()]);
        assert_eq!(parse(b"*-1\r\n").0, Parse::Complete);
    }

    #[test]
    fn bad_lengths_are_errors() {
        assert_eq!(parse(b"*x\r\n").0, Parse::Error(ERR_MBULK_LEN));
        assert_eq!(parse(b"*1\r\n$-5\r\n").0, Parse::Error(ERR_BULK_LEN));
        assert_eq!(parse(b"*1\r\n$999999999999\r\n").0, Parse::Error(ERR_BULK_LEN));
        assert_eq!(parse(b"*1\r\n:5\r\n").0, Parse::Error("ERR Protocol error: expected '$', got ':'"));
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
        assert_eq!(parse_request(b"*11\r\n", &limits, &mut req), Parse::Error(ERR_MBULK_LEN));
        assert_eq!(parse_request(b"*1\r\n$16385\r\n", &limits, &mut req), Parse::Error(ERR_BULK_LEN));
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
    }
}
