//! Writing Redis listpacks (the encoding of stream nodes in RDB payloads),
//! and the size an element takes in one (streams size their nodes by it, as
//! Redis does). Reading is in `dump`.

/// A listpack being built: header, elements, then the end byte on `finish`.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        ListpackWriter { buf: vec![0; 6], count: 0 }
    }
}

/// An element's value: an integer, or a string Redis would keep as one
/// (`lpStringToInt64`: canonical decimal form only).
fn as_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

/// The header and data bytes of an integer element.
fn int_encoding(v: i64, out: &mut Vec<u8>) {
    if (0..=127).contains(&v) {
        out.push(v as u8);
    } else if (-4096..=4095).contains(&v) {
        let u = (v as u64) & 0x1fff;
        out.push(0xc0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if i16::try_from(v).is_ok() {
        out.push(0xf1);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        out.push(0xf2);
        out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
    } else if i32::try_from(v).is_ok() {
        out.push(0xf3);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        out.push(0xf4);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn str_header_len(len: usize) -> usize {
    if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    }
}

fn int_len(v: i64) -> usize {
    if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    }
}

fn backlen_len(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Bytes an integer element takes in a listpack (with its back length).
pub fn int_size(v: i64) -> usize {
    let l = int_len(v);
    l + backlen_len(l)
}

/// Bytes a string element takes in a listpack (integers count as such).
pub fn str_size(s: &[u8]) -> usize {
    if let Some(v) = as_int(s) {
        return int_size(v);
    }
    let l = str_header_len(s.len()) + s.len();
    l + backlen_len(l)
}

impl ListpackWriter {
    fn backlen(&mut self, l: usize) {
        let l = l as u64;
        match backlen_len(l as usize) {
            1 => self.buf.push(l as u8),
            2 => self.buf.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]),
            3 => self.buf.extend_from_slice(&[(l >> 14) as u8, ((l >> 7) & 127) as u8 | 128, (l & 127) as u8 | 128]),
            4 => self.buf.extend_from_slice(&[
                (l >> 21) as u8,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]),
            _ => self.buf.extend_from_slice(&[
                (l >> 28) as u8,
                ((l >> 21) & 127) as u8 | 128,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]),
        }
    }

    pub fn int(&mut self, v: i64) {
        let start = self.buf.len();
        int_encoding(v, &mut self.buf);
        let l = self.buf.len() - start;
        self.backlen(l);
        self.count += 1;
    }

    pub fn str(&mut self, s: &[u8]) {
        if let Some(v) = as_int(s) {
            return self.int(v);
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xe0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        let l = self.buf.len() - start;
        self.backlen(l);
        self.count += 1;
    }

    /// The complete listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let n = self.count.min(u16::MAX as usize) as u16;
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_what_is_written() {
        for v in [0i64, 127, 128, -1, -4096, 4095, 4096, -32768, 40000, -8388608, 8388608, 1 << 40, i64::MIN] {
            let mut w = ListpackWriter::default();
            w.int(v);
            assert_eq!(w.finish().len(), 7 + int_size(v), "{v}");
        }
        for n in [0usize, 1, 63, 64, 127, 128, 4095, 4096, 20000] {
            let s = vec![b'x'; n];
            let mut w = ListpackWriter::default();
            w.str(&s);
            assert_eq!(w.finish().len(), 7 + str_size(&s), "{n}");
        }
        assert_eq!(str_size(b"12"), int_size(12));
        assert_eq!(str_size(b"012"), 5, "not canonical: a string");
    }
}
