//! A small blocking RESP2/RESP3 client and reply model for integration tests.
//!
//! Deliberately independent of the server's own protocol code (std only), so a
//! bug in the node's codec cannot hide itself from the tests.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Default read/write timeout of a [`RawConn`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One complete reply frame, RESP2 or RESP3.
///
/// Nulls are kept distinct (`$-1`, `*-1`, `_`) so that protocol differences
/// show up in differential comparisons. A RESP3 attribute (`|`) is folded
/// together with the reply it annotates into [`Frame::Attribute`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Frame {
    /// `+OK`
    Simple(String),
    /// `-ERR message`
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// `$-1` (RESP2 null bulk string)
    Nil,
    /// `*-1` (RESP2 null array)
    NilArray,
    /// `*N ...`
    Array(Vec<Frame>),
    /// `_` (RESP3 null)
    Null,
    /// `#t` / `#f`
    Boolean(bool),
    /// `,3.14` (raw text, so `inf`/`nan`/formatting differences are visible)
    Double(String),
    /// `(1234567890123456789012`
    BigNumber(String),
    /// `!N\r\nERR message`
    BulkError(String),
    /// `=N\r\ntxt:payload`
    Verbatim { format: String, text: Vec<u8> },
    /// `%N key value ...`
    Map(Vec<(Frame, Frame)>),
    /// `~N ...`
    Set(Vec<Frame>),
    /// `|N key value ...` followed by the reply it annotates.
    Attribute { attrs: Vec<(Frame, Frame)>, reply: Box<Frame> },
    /// `>N ...` (out-of-band push, e.g. pub/sub messages in RESP3)
    Push(Vec<Frame>),
}

impl Frame {
    /// `+OK`.
    pub fn ok() -> Frame {
        Frame::Simple("OK".into())
    }

    /// A simple string.
    pub fn simple(s: &str) -> Frame {
        Frame::Simple(s.into())
    }

    /// A simple error (`-msg`).
    pub fn error(msg: &str) -> Frame {
        Frame::Error(msg.into())
    }

    /// A bulk string.
    pub fn bulk(b: impl AsRef<[u8]>) -> Frame {
        Frame::Bulk(b.as_ref().to_vec())
    }

    /// An integer.
    pub fn int(i: i64) -> Frame {
        Frame::Integer(i)
    }

    /// An array of bulk strings.
    pub fn bulks<A: AsRef<[u8]>>(items: &[A]) -> Frame {
        Frame::Array(items.iter().map(Frame::bulk).collect())
    }

    /// Short name of the frame type, used by type-only comparisons.
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Simple(_) => "simple",
            Frame::Error(_) => "error",
            Frame::Integer(_) => "integer",
            Frame::Bulk(_) => "bulk",
            Frame::Nil => "nil-bulk",
            Frame::NilArray => "nil-array",
            Frame::Array(_) => "array",
            Frame::Null => "null",
            Frame::Boolean(_) => "boolean",
            Frame::Double(_) => "double",
            Frame::BigNumber(_) => "big-number",
            Frame::BulkError(_) => "bulk-error",
            Frame::Verbatim { .. } => "verbatim",
            Frame::Map(_) => "map",
            Frame::Set(_) => "set",
            Frame::Attribute { .. } => "attribute",
            Frame::Push(_) => "push",
        }
    }

    /// True for `-ERR` and `!ERR` replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_) | Frame::BulkError(_))
    }

    /// The message of an error reply.
    pub fn error_message(&self) -> Option<&str> {
        match self {
            Frame::Error(m) | Frame::BulkError(m) => Some(m),
            _ => None,
        }
    }

    /// First word of an error reply ("ERR", "WRONGTYPE", ...).
    pub fn error_code(&self) -> Option<&str> {
        self.error_message().map(|m| m.split_whitespace().next().unwrap_or(""))
    }

    /// True for any of the null encodings.
    pub fn is_null(&self) -> bool {
        matches!(self, Frame::Nil | Frame::NilArray | Frame::Null)
    }

    /// Payload of a bulk, simple or verbatim string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Frame::Bulk(b) => Some(b),
            Frame::Simple(s) => Some(s.as_bytes()),
            Frame::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Payload of a string reply, if it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// Value of an integer reply.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Frame::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// Elements of an array, set or push reply.
    pub fn as_array(&self) -> Option<&[Frame]> {
        match self {
            Frame::Array(v) | Frame::Set(v) | Frame::Push(v) => Some(v),
            _ => None,
        }
    }

    /// Recursively sorts arrays and sets (and map entries by key), for
    /// comparing replies whose order is unspecified (SMEMBERS, KEYS, ...).
    pub fn sorted(&self) -> Frame {
        match self {
            Frame::Array(v) => Frame::Array(sorted_vec(v)),
            Frame::Set(v) => Frame::Set(sorted_vec(v)),
            Frame::Map(m) => Frame::Map(sorted_map(m)),
            Frame::Push(v) => Frame::Push(v.iter().map(Frame::sorted).collect()),
            Frame::Attribute { attrs, reply } => {
                Frame::Attribute { attrs: sorted_map(attrs), reply: Box::new(reply.sorted()) }
            }
            other => other.clone(),
        }
    }

    /// Sorts a flat `[k1, v1, k2, v2, ...]` array (RESP2 HGETALL, CONFIG GET)
    /// by pair, keeping each key next to its value; maps are sorted by key.
    /// Values themselves are left untouched. Other frames are returned as is.
    pub fn sorted_pairs(&self) -> Frame {
        match self {
            Frame::Array(v) if v.len() % 2 == 0 => {
                let mut pairs: Vec<(&Frame, &Frame)> = v.chunks_exact(2).map(|p| (&p[0], &p[1])).collect();
                pairs.sort();
                Frame::Array(pairs.into_iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect())
            }
            Frame::Map(m) => {
                let mut m = m.clone();
                m.sort();
                Frame::Map(m)
            }
            other => other.clone(),
        }
    }

    /// Serializes the frame back to wire format.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        fn blob(out: &mut Vec<u8>, prefix: u8, data: &[u8]) {
            out.push(prefix);
            out.extend_from_slice(format!("{}\r\n", data.len()).as_bytes());
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        }
        fn line(out: &mut Vec<u8>, prefix: u8, text: &str) {
            out.push(prefix);
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        fn pairs(out: &mut Vec<u8>, prefix: u8, m: &[(Frame, Frame)]) {
            line(out, prefix, &m.len().to_string());
            for (k, v) in m {
                k.encode_into(out);
                v.encode_into(out);
            }
        }
        fn items(out: &mut Vec<u8>, prefix: u8, v: &[Frame]) {
            line(out, prefix, &v.len().to_string());
            for f in v {
                f.encode_into(out);
            }
        }
        match self {
            Frame::Simple(s) => line(out, b'+', s),
            Frame::Error(s) => line(out, b'-', s),
            Frame::Integer(i) => line(out, b':', &i.to_string()),
            Frame::Bulk(b) => blob(out, b'$', b),
            Frame::Nil => line(out, b'$', "-1"),
            Frame::NilArray => line(out, b'*', "-1"),
            Frame::Array(v) => items(out, b'*', v),
            Frame::Null => line(out, b'_', ""),
            Frame::Boolean(b) => line(out, b'#', if *b { "t" } else { "f" }),
            Frame::Double(d) => line(out, b',', d),
            Frame::BigNumber(n) => line(out, b'(', n),
            Frame::BulkError(e) => blob(out, b'!', e.as_bytes()),
            Frame::Verbatim { format, text } => {
                let mut payload = format!("{format}:").into_bytes();
                payload.extend_from_slice(text);
                blob(out, b'=', &payload);
            }
            Frame::Map(m) => pairs(out, b'%', m),
            Frame::Set(v) => items(out, b'~', v),
            Frame::Attribute { attrs, reply } => {
                pairs(out, b'|', attrs);
                reply.encode_into(out);
            }
            Frame::Push(v) => items(out, b'>', v),
        }
    }
}

fn sorted_vec(v: &[Frame]) -> Vec<Frame> {
    let mut v: Vec<Frame> = v.iter().map(Frame::sorted).collect();
    v.sort();
    v
}

fn sorted_map(m: &[(Frame, Frame)]) -> Vec<(Frame, Frame)> {
    let mut m: Vec<(Frame, Frame)> = m.iter().map(|(k, v)| (k.sorted(), v.sorted())).collect();
    m.sort();
    m
}

/// Compact, unambiguous rendering used in failure reports, e.g.
/// `[+OK, "v", :3, (nil $-1), -ERR boom]`.
impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, open: &str, v: &[Frame], close: &str) -> fmt::Result {
            f.write_str(open)?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{x}")?;
            }
            f.write_str(close)
        }
        fn map(f: &mut fmt::Formatter<'_>, open: &str, m: &[(Frame, Frame)]) -> fmt::Result {
            f.write_str(open)?;
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k}: {v}")?;
            }
            f.write_str("}")
        }
        match self {
            Frame::Simple(s) => write!(f, "+{s}"),
            Frame::Error(s) => write!(f, "-{s}"),
            Frame::Integer(i) => write!(f, ":{i}"),
            Frame::Bulk(b) => write!(f, "\"{}\"", b.escape_ascii()),
            Frame::Nil => f.write_str("(nil $-1)"),
            Frame::NilArray => f.write_str("(nil *-1)"),
            Frame::Array(v) => list(f, "[", v, "]"),
            Frame::Null => f.write_str("(null _)"),
            Frame::Boolean(b) => write!(f, "#{}", if *b { 't' } else { 'f' }),
            Frame::Double(d) => write!(f, ",{d}"),
            Frame::BigNumber(n) => write!(f, "({n}"),
            Frame::BulkError(s) => write!(f, "!{s}"),
            Frame::Verbatim { format, text } => write!(f, "={format}:\"{}\"", text.escape_ascii()),
            Frame::Map(m) => map(f, "%{", m),
            Frame::Set(v) => list(f, "~{", v, "}"),
            Frame::Attribute { attrs, reply } => {
                map(f, "|{", attrs)?;
                write!(f, " {reply}")
            }
            Frame::Push(v) => list(f, ">[", v, "]"),
        }
    }
}

/// Encodes one command as a RESP array of bulk strings.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Renders a command for humans: `SET k "two words"`.
pub fn display_command<A: AsRef<[u8]>>(args: &[A]) -> String {
    args.iter()
        .map(|a| {
            let a = a.as_ref();
            let plain = !a.is_empty() && a.iter().all(|&c| c.is_ascii_graphic() && c != b'"' && c != b'\\');
            if plain { String::from_utf8_lossy(a).into_owned() } else { format!("\"{}\"", a.escape_ascii()) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads one line and strips its CRLF. `Ok(None)` on EOF before any byte.
fn read_line<R: BufRead>(r: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    if r.read_until(b'\n', &mut line)? == 0 {
        return Ok(None);
    }
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("incomplete line {:?}", line.escape_ascii().to_string()),
        ));
    }
    line.truncate(line.len() - 2);
    Ok(Some(line))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn int(bytes: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid(format!("bad integer {:?}", bytes.escape_ascii().to_string())))
}

fn count(bytes: &[u8]) -> io::Result<usize> {
    let n = int(bytes)?;
    usize::try_from(n).map_err(|_| invalid(format!("bad length {n}")))
}

/// Reads a length-prefixed payload plus its trailing CRLF.
fn read_blob<R: BufRead>(r: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len + 2];
    r.read_exact(&mut buf)?;
    if !buf.ends_with(b"\r\n") {
        return Err(invalid("blob not terminated by CRLF".into()));
    }
    buf.truncate(len);
    Ok(buf)
}

/// Reads one complete frame. `Ok(None)` means clean EOF before the first
/// byte; EOF in the middle of a frame is `UnexpectedEof`.
pub fn read_frame_from<R: BufRead>(r: &mut R) -> io::Result<Option<Frame>> {
    match read_line(r)? {
        None => Ok(None),
        Some(line) => parse_frame(r, line).map(Some),
    }
}

fn read_nested<R: BufRead>(r: &mut R) -> io::Result<Frame> {
    read_frame_from(r)?.ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "EOF inside an aggregate"))
}

fn read_pairs<R: BufRead>(r: &mut R, n: usize) -> io::Result<Vec<(Frame, Frame)>> {
    (0..n).map(|_| Ok((read_nested(r)?, read_nested(r)?))).collect()
}

fn read_items<R: BufRead>(r: &mut R, n: usize) -> io::Result<Vec<Frame>> {
    (0..n).map(|_| read_nested(r)).collect()
}

fn parse_frame<R: BufRead>(r: &mut R, line: Vec<u8>) -> io::Result<Frame> {
    let Some((&tag, rest)) = line.split_first() else {
        return Err(invalid("empty line where a frame was expected".into()));
    };
    if rest.first() == Some(&b'?') {
        return Err(invalid("streamed RESP3 aggregates are not supported".into()));
    }
    Ok(match tag {
        b'+' => Frame::Simple(text(rest)),
        b'-' => Frame::Error(text(rest)),
        b':' => Frame::Integer(int(rest)?),
        b'$' if rest == b"-1" => Frame::Nil,
        b'$' => Frame::Bulk(read_blob(r, count(rest)?)?),
        b'*' if rest == b"-1" => Frame::NilArray,
        b'*' => Frame::Array(read_items(r, count(rest)?)?),
        b'_' if rest.is_empty() => Frame::Null,
        b'#' if rest == b"t" => Frame::Boolean(true),
        b'#' if rest == b"f" => Frame::Boolean(false),
        b',' => Frame::Double(text(rest)),
        b'(' => Frame::BigNumber(text(rest)),
        b'!' => Frame::BulkError(text(&read_blob(r, count(rest)?)?)),
        b'=' => {
            let payload = read_blob(r, count(rest)?)?;
            if payload.len() < 4 || payload[3] != b':' {
                return Err(invalid("verbatim string without 'fmt:' prefix".into()));
            }
            Frame::Verbatim { format: text(&payload[..3]), text: payload[4..].to_vec() }
        }
        b'%' => Frame::Map(read_pairs(r, count(rest)?)?),
        b'~' => Frame::Set(read_items(r, count(rest)?)?),
        b'|' => {
            let attrs = read_pairs(r, count(rest)?)?;
            Frame::Attribute { attrs, reply: Box::new(read_nested(r)?) }
        }
        b'>' => Frame::Push(read_items(r, count(rest)?)?),
        _ => {
            return Err(invalid(format!("unknown frame line {:?}", line.escape_ascii().to_string())));
        }
    })
}

/// Parses exactly one frame from a byte slice (for tests of the parser).
pub fn parse_bytes(bytes: &[u8]) -> io::Result<Frame> {
    let mut r = bytes;
    let frame = read_nested(&mut r)?;
    if !r.is_empty() {
        return Err(invalid(format!("{} trailing bytes", r.len())));
    }
    Ok(frame)
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
            Stream::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)
            }
        }
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// A raw RESP connection (TCP or unix socket) with read/write timeouts.
///
/// The panicking methods (`send`, `read_frame`, `cmd`) include the peer
/// address in their messages; the `try_` variants return `io::Result`.
/// After an I/O error the connection state is undefined.
pub struct RawConn {
    reader: BufReader<Stream>,
    writer: Stream,
    peer: String,
}

impl RawConn {
    /// Connects over TCP with [`DEFAULT_TIMEOUT`] for reads and writes.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<RawConn> {
        let stream = TcpStream::connect(addr)?;
        let peer = stream.peer_addr()?.to_string();
        stream.set_nodelay(true)?;
        Self::from_stream(Stream::Tcp(stream), peer)
    }

    /// Connects over TCP, giving up on the connect after `timeout`.
    pub fn connect_timeout(addr: SocketAddr, timeout: Duration) -> io::Result<RawConn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        Self::from_stream(Stream::Tcp(stream), addr.to_string())
    }

    /// Connects to a unix socket.
    pub fn connect_unix(path: impl AsRef<Path>) -> io::Result<RawConn> {
        let path = path.as_ref();
        let stream = UnixStream::connect(path)?;
        Self::from_stream(Stream::Unix(stream), format!("unix:{}", path.display()))
    }

    fn from_stream(stream: Stream, peer: String) -> io::Result<RawConn> {
        stream.set_timeouts(Some(DEFAULT_TIMEOUT))?;
        Ok(RawConn { writer: stream.try_clone()?, reader: BufReader::new(stream), peer })
    }

    /// Address of the peer, for messages.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Sets the read and write timeouts (`None` blocks forever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.writer.set_timeouts(timeout).unwrap_or_else(|e| panic!("{}: set timeout: {e}", self.peer));
    }

    /// Writes one command as a RESP array of bulk strings.
    pub fn try_send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<()> {
        self.writer.write_all(&encode_command(args))
    }

    /// Writes one command as a RESP array of bulk strings; panics on error.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.try_send(args).unwrap_or_else(|e| panic!("{}: sending {}: {e}", self.peer, display_command(args)));
    }

    /// Writes raw bytes (inline commands, malformed input, pipelines).
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Writes raw bytes; panics on error.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.try_send_raw(bytes).unwrap_or_else(|e| panic!("{}: sending raw bytes: {e}", self.peer));
    }

    /// Reads one complete reply. `Ok(None)` if the peer closed the connection
    /// cleanly before sending anything; timeouts are `ErrorKind::TimedOut`.
    pub fn try_read_frame(&mut self) -> io::Result<Option<Frame>> {
        read_frame_from(&mut self.reader).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, "read timed out"),
            _ => e,
        })
    }

    /// Reads one complete reply; panics on EOF, timeout or protocol error.
    pub fn read_frame(&mut self) -> Frame {
        match self.try_read_frame() {
            Ok(Some(f)) => f,
            Ok(None) => panic!("{}: connection closed while awaiting a reply", self.peer),
            Err(e) => panic!("{}: reading reply: {e}", self.peer),
        }
    }

    /// True if the peer has closed the connection (EOF or reset), waiting at
    /// most the current read timeout. Panics if a frame arrives instead.
    pub fn is_closed(&mut self) -> bool {
        match self.try_read_frame() {
            Ok(None) => true,
            Ok(Some(f)) => panic!("{}: expected EOF, got {f}", self.peer),
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            ),
        }
    }

    /// Sends a command and reads its reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.send(args);
        match self.try_read_frame() {
            Ok(Some(f)) => f,
            Ok(None) => panic!("{}: connection closed awaiting reply to {}", self.peer, display_command(args)),
            Err(e) => panic!("{}: reading reply to {}: {e}", self.peer, display_command(args)),
        }
    }

    /// Sends a command and asserts the reply is `+OK`.
    pub fn ok<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let reply = self.cmd(args);
        assert_eq!(reply, Frame::ok(), "{}: {} did not reply +OK", self.peer, display_command(args));
    }

    /// Writes all commands in one go, then reads one reply per command.
    pub fn pipeline(&mut self, cmds: &[&[&str]]) -> Vec<Frame> {
        let bytes: Vec<u8> = cmds.iter().flat_map(|c| encode_command(c)).collect();
        self.send_raw(&bytes);
        cmds.iter().map(|_| self.read_frame()).collect()
    }

    /// Switches to RESP3 with `HELLO 3`; panics unless the reply is a map.
    pub fn hello3(&mut self) -> Frame {
        let reply = self.cmd(&["HELLO", "3"]);
        assert!(matches!(reply, Frame::Map(_)), "{}: HELLO 3 was not accepted: {reply}", self.peer);
        reply
    }

    /// Half-closes the write side (the server sees EOF).
    pub fn shutdown_write(&mut self) {
        let _ = self.writer.shutdown(Shutdown::Write);
    }
}
