//! Where one reply ends in a byte stream: what a node relaying another
//! node's replies needs (it passes them on as they are, without decoding).

/// The length of the first complete RESP2/RESP3 reply in `buf`: `Ok(None)`
/// while incomplete, `Err` when the bytes are not RESP.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    let mut pos = 0;
    // Values still to read before the reply is complete.
    let mut owed: u64 = 1;
    while owed > 0 {
        let Some(&kind) = buf.get(pos) else { return Ok(None) };
        let Some(nl) = buf[pos..].windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
        let line = &buf[pos + 1..pos + nl];
        pos += nl + 2;
        owed -= 1;
        let count = || -> Result<i64, &'static str> {
            std::str::from_utf8(line).ok().and_then(|s| s.parse::<i64>().ok()).ok_or("bad length in a reply")
        };
        match kind {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => {}
            b'$' | b'!' | b'=' => {
                let n = count()?;
                if n >= 0 {
                    let end = pos + n as usize + 2;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    pos = end;
                }
            }
            b'*' | b'~' | b'>' => owed += count()?.max(0) as u64,
            b'%' => owed += 2 * count()?.max(0) as u64,
            // Attributes come before the value they describe.
            b'|' => owed += 2 * count()?.max(0) as u64 + 1,
            _ => return Err("not a RESP reply"),
        }
    }
    Ok(Some(pos))
}

#[cfg(test)]
mod tests {
    use super::reply_len;

    #[test]
    fn finds_the_end_of_each_kind() {
        assert_eq!(reply_len(b"+OK\r\n+next"), Ok(Some(5)));
        assert_eq!(reply_len(b"$3\r\nabc\r\n"), Ok(Some(9)));
        assert_eq!(reply_len(b"$3\r\nab"), Ok(None));
        assert_eq!(reply_len(b"$-1\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"*2\r\n:1\r\n$1\r\nx\r\n:9\r\n"), Ok(Some(15)));
        assert_eq!(reply_len(b"*2\r\n:1\r\n"), Ok(None));
        assert_eq!(reply_len(b"*-1\r\n"), Ok(Some(5)));
        assert_eq!(reply_len(b"%1\r\n+a\r\n*0\r\n"), Ok(Some(12)));
        assert_eq!(reply_len(b"|1\r\n+k\r\n+v\r\n:5\r\n"), Ok(Some(16)));
        assert_eq!(reply_len(b"*1\r\n*1\r\n$2\r\nab\r\n"), Ok(Some(16)));
        assert_eq!(reply_len(b""), Ok(None));
        assert!(reply_len(b"?x\r\n").is_err());
    }
}
