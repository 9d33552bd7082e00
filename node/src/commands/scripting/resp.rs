//! Reads back the RESP2/RESP3 reply a command handler wrote, so that
//! `redis.call` can turn it into Lua values.

/// One reply, as Redis's script engine distinguishes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Status(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` and RESP3 `_`.
    Null,
    Array(Vec<Resp>),
    Map(Vec<(Resp, Resp)>),
    Set(Vec<Resp>),
    Double(f64),
    Bool(bool),
    BigNumber(Vec<u8>),
    Verbatim(Vec<u8>, Vec<u8>),
}

/// Parses every reply in `buf` (a handler writes one, but stays safe).
pub fn parse(buf: &[u8]) -> Option<Resp> {
    let mut pos = 0;
    parse_one(buf, &mut pos)
}

fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let start = *pos;
    let rel = buf[start..].windows(2).position(|w| w == b"\r\n")?;
    *pos = start + rel + 2;
    Some(&buf[start..start + rel])
}

fn num(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn parse_one(buf: &[u8], pos: &mut usize) -> Option<Resp> {
    let kind = *buf.get(*pos)?;
    *pos += 1;
    let l = line(buf, pos)?;
    Some(match kind {
        b'+' => Resp::Status(l.to_vec()),
        b'-' => Resp::Error(l.to_vec()),
        b':' => Resp::Int(num(l)?),
        b'$' | b'=' | b'!' => {
            let n = num(l)?;
            if n < 0 {
                return Some(Resp::Null);
            }
            let n = n as usize;
            let data = buf.get(*pos..*pos + n)?.to_vec();
            *pos += n + 2;
            match kind {
                b'$' => Resp::Bulk(data),
                b'!' => Resp::Error(data),
                _ => {
                    let (fmt, text) = if data.len() >= 4 && data[3] == b':' {
                        (data[..3].to_vec(), data[4..].to_vec())
                    } else {
                        (b"txt".to_vec(), data)
                    };
                    Resp::Verbatim(fmt, text)
                }
            }
        }
        b'*' | b'~' | b'>' => {
            let n = num(l)?;
            if n < 0 {
                return Some(Resp::Null);
            }
            let mut v = Vec::with_capacity(n as usize);
            for _ in 0..n {
                v.push(parse_one(buf, pos)?);
            }
            if kind == b'~' { Resp::Set(v) } else { Resp::Array(v) }
        }
        b'%' | b'|' => {
            let n = num(l)?;
            let mut v = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let k = parse_one(buf, pos)?;
                let val = parse_one(buf, pos)?;
                v.push((k, val));
            }
            if kind == b'|' {
                // An attribute precedes the real reply: skipped, as Redis does.
                return parse_one(buf, pos);
            }
            Resp::Map(v)
        }
        b'_' => Resp::Null,
        b'#' => Resp::Bool(l == b"t"),
        b',' => {
            let s = std::str::from_utf8(l).ok()?;
            Resp::Double(match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "nan" => f64::NAN,
                _ => s.parse().ok()?,
            })
        }
        b'(' => Resp::BigNumber(l.to_vec()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_replies() {
        let r = parse(b"*3\r\n:1\r\n$3\r\nabc\r\n*-1\r\n").unwrap();
        assert_eq!(r, Resp::Array(vec![Resp::Int(1), Resp::Bulk(b"abc".to_vec()), Resp::Null]));
        let r = parse(b"%1\r\n+a\r\n,1.5\r\n").unwrap();
        assert_eq!(r, Resp::Map(vec![(Resp::Status(b"a".to_vec()), Resp::Double(1.5))]));
        assert_eq!(parse(b"=8\r\ntxt:abcd\r\n").unwrap(), Resp::Verbatim(b"txt".to_vec(), b"abcd".to_vec()));
        assert_eq!(parse(b"-ERR x\r\n").unwrap(), Resp::Error(b"ERR x".to_vec()));
    }
}
