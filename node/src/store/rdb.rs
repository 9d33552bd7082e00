//! The building blocks of Redis's RDB encoding that DUMP payloads
//! (`dump.rs`) and streams (`stream_rdb.rs`) share: the type bytes,
//! lengths and strings (read in every encoding: plain, integer, LZF), a
//! listpack's entries, the CRC-64 of a payload's trailer, and the error a
//! malformed payload gets.

type R<T> = Result<T, DumpError>;

/// The type bytes of RDB values.
pub(super) const T_STRING: u8 = 0;
pub(super) const T_LIST: u8 = 1;
pub(super) const T_SET: u8 = 2;
pub(super) const T_ZSET: u8 = 3;
pub(super) const T_HASH: u8 = 4;
pub(super) const T_ZSET_2: u8 = 5;
pub(super) const T_SET_INTSET: u8 = 11;
pub(super) const T_HASH_LISTPACK: u8 = 16;
pub(super) const T_ZSET_LISTPACK: u8 = 17;
pub(super) const T_LIST_QUICKLIST_2: u8 = 18;
pub(super) const T_SET_LISTPACK: u8 = 20;
pub(super) const T_STREAM_LISTPACKS: u8 = 15;
pub(super) const T_STREAM_LISTPACKS_2: u8 = 19;
pub(super) const T_STREAM_LISTPACKS_3: u8 = 21;

/// Why a payload was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpError {
    /// The trailer's version or checksum is wrong (Redis's "DUMP payload
    /// version or checksum are wrong").
    Trailer,
    /// The value itself is malformed or of an unsupported form ("Bad data
    /// format").
    Format,
}

// ------------------------------------------------------------------ CRC-64

/// Redis's CRC-64 (Jones polynomial, reflected, init 0, no final xor).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 reflected
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    for &b in data {
        crc = table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

// ------------------------------------------------------------------ writing

/// Appends an RDB length (also what FUNCTION DUMP writes).
pub fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

// ------------------------------------------------------------------ reading

/// Reads RDB-encoded items from a payload's body, front to back.
pub struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Everything was read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(super) fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(DumpError::Format)?;
        let s = self.buf.get(self.pos..end).ok_or(DumpError::Format)?;
        self.pos = end;
        Ok(s)
    }

    pub fn byte(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    /// A length, or (Err-free) an encoded-string marker: (value, special).
    pub(super) fn len_or_enc(&mut self) -> R<(u64, bool)> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false),
            2 => match b {
                0x80 => (u32::from_be_bytes(self.take(4)?.try_into().unwrap()) as u64, false),
                0x81 => (u64::from_be_bytes(self.take(8)?.try_into().unwrap()), false),
                _ => return Err(DumpError::Format),
            },
            _ => ((b & 0x3f) as u64, true),
        })
    }

    pub(super) fn len(&mut self) -> R<usize> {
        match self.len_or_enc()? {
            (n, false) => {
                // Every element takes at least a byte: a length beyond the
                // payload is a lie, not an allocation to make.
                if n as usize > self.buf.len() { Err(DumpError::Format) } else { Ok(n as usize) }
            }
            _ => Err(DumpError::Format),
        }
    }

    /// A string in any of RDB's encodings (plain, integer, LZF).
    pub fn string(&mut self) -> R<Vec<u8>> {
        let (n, special) = self.len_or_enc()?;
        if !special {
            if n as usize > self.buf.len() {
                return Err(DumpError::Format);
            }
            return Ok(self.take(n as usize)?.to_vec());
        }
        let v: i64 = match n {
            0 => self.byte()? as i8 as i64,
            1 => i16::from_le_bytes(self.take(2)?.try_into().unwrap()) as i64,
            2 => i32::from_le_bytes(self.take(4)?.try_into().unwrap()) as i64,
            3 => {
                let clen = self.len()?;
                let ulen = self.len_or_enc()?;
                if ulen.1 || ulen.0 > (512 << 20) {
                    return Err(DumpError::Format);
                }
                let data = self.take(clen)?;
                return lzf_decompress(data, ulen.0 as usize);
            }
            _ => return Err(DumpError::Format),
        };
        Ok(v.to_string().into_bytes())
    }
}

/// LZF decompression (liblzf's format, as Redis compresses strings).
fn lzf_decompress(inp: &[u8], out_len: usize) -> R<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < inp.len() {
        let ctrl = inp[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = inp.get(i..i + n).ok_or(DumpError::Format)?;
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *inp.get(i).ok_or(DumpError::Format)? as usize;
                i += 1;
            }
            let low = *inp.get(i).ok_or(DumpError::Format)? as usize;
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if back > out.len() {
                return Err(DumpError::Format);
            }
            let start = out.len() - back;
            for k in 0..len + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > out_len {
            return Err(DumpError::Format);
        }
    }
    if out.len() != out_len {
        return Err(DumpError::Format);
    }
    Ok(out)
}

/// The entries of a listpack, as strings (integers in decimal).
pub(super) fn listpack(lp: &[u8]) -> R<Vec<Vec<u8>>> {
    if lp.len() < 7 || u32::from_le_bytes(lp[0..4].try_into().unwrap()) as usize != lp.len() {
        return Err(DumpError::Format);
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let b = *lp.get(p).ok_or(DumpError::Format)?;
        if b == 0xff {
            break;
        }
        let get = |from: usize, n: usize| lp.get(from..from + n).ok_or(DumpError::Format);
        let (entry, head): (Vec<u8>, usize) = if b & 0x80 == 0 {
            ((b & 0x7f).to_string().into_bytes(), 1)
        } else if b & 0xc0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (get(p + 1, n)?.to_vec(), 1 + n)
        } else if b & 0xe0 == 0xc0 {
            let raw = (((b & 0x1f) as u16) << 8) | *lp.get(p + 1).ok_or(DumpError::Format)? as u16;
            let v = ((raw << 3) as i16 >> 3) as i64;
            (v.to_string().into_bytes(), 2)
        } else if b & 0xf0 == 0xe0 {
            let n = (((b & 0x0f) as usize) << 8) | *lp.get(p + 1).ok_or(DumpError::Format)? as usize;
            (get(p + 2, n)?.to_vec(), 2 + n)
        } else {
            match b {
                0xf0 => {
                    let n = u32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()) as usize;
                    (get(p + 5, n)?.to_vec(), 5 + n)
                }
                0xf1 => (i16::from_le_bytes(get(p + 1, 2)?.try_into().unwrap()).to_string().into_bytes(), 3),
                0xf2 => {
                    let s = get(p + 1, 3)?;
                    let v = (i32::from_le_bytes([0, s[0], s[1], s[2]]) >> 8) as i64;
                    (v.to_string().into_bytes(), 4)
                }
                0xf3 => (i32::from_le_bytes(get(p + 1, 4)?.try_into().unwrap()).to_string().into_bytes(), 5),
                0xf4 => (i64::from_le_bytes(get(p + 1, 8)?.try_into().unwrap()).to_string().into_bytes(), 9),
                _ => return Err(DumpError::Format),
            }
        };
        let backlen = match head {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        p += head + backlen;
        out.push(entry);
    }
    let n = u16::from_le_bytes(lp[4..6].try_into().unwrap());
    if n != u16::MAX && n as usize != out.len() {
        return Err(DumpError::Format);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_check_value() {
        // Redis's crc64 test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lzf_back_references() {
        // "aaaaaaaaaa": literal 'a', then a back-reference of length 9 at distance 1.
        let data = [0u8, b'a', (7 << 5), 9 - 2 - 7, 0];
        assert_eq!(lzf_decompress(&data, 10).unwrap(), b"aaaaaaaaaa");
    }
}
