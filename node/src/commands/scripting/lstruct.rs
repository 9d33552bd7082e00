//! `struct`: Roberto Ierusalimschy's struct library (pack, unpack, size)
//! as Redis embeds it: endianness `<` `>` `=`, alignment `!n`, `x` padding,
//! `b B h H l L T i[n] I[n]` integers, `f d` floats, `s` zero-terminated and
//! `c[n]` fixed strings (`c0` in unpack takes its length from the value
//! before it).

use mlua::{Lua, MultiValue, Table, Value};

fn rt<T>(m: String) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(m))
}

struct Fmt<'a> {
    f: &'a [u8],
    pos: usize,
    little: bool,
    maxalign: usize,
}

enum Item {
    Int { size: usize, signed: bool },
    Float,
    Double,
    Pad,
    ZString,
    Chars(Option<usize>),
}

impl Fmt<'_> {
    fn new(f: &[u8]) -> Fmt<'_> {
        Fmt { f, pos: 0, little: true, maxalign: 1 }
    }

    fn num(&mut self) -> Option<usize> {
        let start = self.pos;
        while self.pos < self.f.len() && self.f[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        if start == self.pos { None } else { std::str::from_utf8(&self.f[start..self.pos]).ok()?.parse().ok() }
    }

    /// The next item and its size, handling option characters on the way.
    fn next(&mut self) -> mlua::Result<Option<(Item, usize)>> {
        while self.pos < self.f.len() {
            let c = self.f[self.pos];
            self.pos += 1;
            let item = match c {
                b' ' => continue,
                b'<' | b'=' => {
                    self.little = true;
                    continue;
                }
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'!' => {
                    self.maxalign = self.num().unwrap_or(8);
                    continue;
                }
                b'b' => Item::Int { size: 1, signed: true },
                b'B' => Item::Int { size: 1, signed: false },
                b'h' => Item::Int { size: 2, signed: true },
                b'H' => Item::Int { size: 2, signed: false },
                b'l' => Item::Int { size: 8, signed: true },
                b'L' | b'T' => Item::Int { size: 8, signed: false },
                b'i' | b'I' => {
                    let size = self.num().unwrap_or(4);
                    if size == 0 || size > 8 {
                        return rt(format!("integral size {size} is larger than limit of 8"));
                    }
                    Item::Int { size, signed: c == b'i' }
                }
                b'f' => Item::Float,
                b'd' => Item::Double,
                b'x' => Item::Pad,
                b's' => Item::ZString,
                b'c' => Item::Chars(self.num()),
                _ => return rt(format!("bad argument #1 to 'pack' (invalid format option '{}')", c as char)),
            };
            let size = match &item {
                Item::Int { size, .. } => *size,
                Item::Float => 4,
                Item::Double => 8,
                Item::Pad => 1,
                _ => 0,
            };
            return Ok(Some((item, size)));
        }
        Ok(None)
    }

    fn pad(&self, total: usize, size: usize) -> usize {
        let align = size.min(self.maxalign);
        if align <= 1 || !align.is_power_of_two() { 0 } else { (align - (total & (align - 1))) & (align - 1) }
    }
}

fn number(v: Option<&Value>, n: usize) -> mlua::Result<f64> {
    match v {
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::Number(f)) => Ok(*f),
        Some(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes())
            .trim()
            .parse()
            .or_else(|_| rt(format!("bad argument #{n} to 'pack' (number expected, got string)"))),
        other => rt(format!(
            "bad argument #{n} to 'pack' (number expected, got {})",
            other.map(|v| v.type_name()).unwrap_or("no value")
        )),
    }
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let fmt: mlua::String = match args.front() {
                Some(Value::String(s)) => s.clone(),
                _ => return rt("bad argument #1 to 'pack' (string expected)".into()),
            };
            let fmt = fmt.as_bytes().to_vec();
            let mut f = Fmt::new(&fmt);
            let mut out: Vec<u8> = Vec::new();
            let mut arg = 1;
            while let Some((item, size)) = f.next()? {
                let pad = f.pad(out.len(), size);
                out.extend(std::iter::repeat_n(0u8, pad));
                match item {
                    Item::Pad => out.push(0),
                    Item::Int { size, .. } => {
                        let n = number(args.get(arg), arg + 1)?;
                        arg += 1;
                        let v: u64 = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
                        let bytes = v.to_le_bytes();
                        if f.little {
                            out.extend_from_slice(&bytes[..size]);
                        } else {
                            out.extend(bytes[..size].iter().rev());
                        }
                    }
                    Item::Float | Item::Double => {
                        let n = number(args.get(arg), arg + 1)?;
                        arg += 1;
                        let bytes: Vec<u8> =
                            if size == 4 { (n as f32).to_le_bytes().to_vec() } else { n.to_le_bytes().to_vec() };
                        if f.little {
                            out.extend_from_slice(&bytes);
                        } else {
                            out.extend(bytes.iter().rev());
                        }
                    }
                    Item::ZString | Item::Chars(_) => {
                        let s = match args.get(arg) {
                            Some(Value::String(s)) => s.as_bytes().to_vec(),
                            Some(Value::Integer(i)) => i.to_string().into_bytes(),
                            Some(Value::Number(n)) => crate::protocol::format_g(*n, 14).into_bytes(),
                            _ => return rt(format!("bad argument #{} to 'pack' (string expected)", arg + 1)),
                        };
                        arg += 1;
                        match item {
                            Item::ZString => {
                                if s.contains(&0) {
                                    return rt(format!("bad argument #{} to 'pack' (string contains zeros)", arg));
                                }
                                out.extend_from_slice(&s);
                                out.push(0);
                            }
                            Item::Chars(n) => {
                                let n = n.unwrap_or(s.len());
                                if s.len() < n {
                                    return rt(format!("bad argument #{} to 'pack' (string too short)", arg));
                                }
                                out.extend_from_slice(&s[..n]);
                            }
                            _ => {}
                        }
                    }
                }
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, (fmt, data, init): (mlua::String, mlua::String, Option<i64>)| {
            let fmt = fmt.as_bytes().to_vec();
            let data = data.as_bytes().to_vec();
            let mut f = Fmt::new(&fmt);
            let mut pos = (init.unwrap_or(1).max(1) - 1) as usize;
            let mut out = MultiValue::new();
            let short = || rt::<MultiValue>("data string too short".into());
            while let Some((item, size)) = f.next()? {
                pos += f.pad(pos, size);
                if pos + size > data.len() {
                    return short();
                }
                match item {
                    Item::Pad => pos += 1,
                    Item::Int { size, signed } => {
                        let b = &data[pos..pos + size];
                        let mut v: u64 = 0;
                        for i in 0..size {
                            let byte = if f.little { b[size - 1 - i] } else { b[i] };
                            v = (v << 8) | byte as u64;
                        }
                        let n = if signed && size < 8 {
                            let shift = 64 - size * 8;
                            (((v << shift) as i64) >> shift) as f64
                        } else if signed {
                            v as i64 as f64
                        } else {
                            v as f64
                        };
                        out.push_back(Value::Number(n));
                        pos += size;
                    }
                    Item::Float | Item::Double => {
                        let mut b = data[pos..pos + size].to_vec();
                        if !f.little {
                            b.reverse();
                        }
                        let n = if size == 4 {
                            f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64
                        } else {
                            f64::from_le_bytes(b.try_into().expect("8 bytes"))
                        };
                        out.push_back(Value::Number(n));
                        pos += size;
                    }
                    Item::ZString => {
                        let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                            return rt("unfinished string in data".into());
                        };
                        out.push_back(Value::String(lua.create_string(&data[pos..pos + end])?));
                        pos += end + 1;
                    }
                    Item::Chars(n) => {
                        let n = match n {
                            Some(0) | None => match out.pop_back() {
                                Some(Value::Number(x)) => x as usize,
                                Some(Value::Integer(x)) => x as usize,
                                _ => return rt("format 'c0' needs a previous size".into()),
                            },
                            Some(n) => n,
                        };
                        if pos + n > data.len() {
                            return short();
                        }
                        out.push_back(Value::String(lua.create_string(&data[pos..pos + n])?));
                        pos += n;
                    }
                }
            }
            out.push_back(Value::Integer(pos as i64 + 1));
            Ok(out)
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|_, fmt: mlua::String| {
            let fmt = fmt.as_bytes().to_vec();
            let mut f = Fmt::new(&fmt);
            let mut total = 0usize;
            while let Some((item, size)) = f.next()? {
                total += f.pad(total, size);
                match item {
                    Item::ZString | Item::Chars(None) | Item::Chars(Some(0)) => {
                        return rt("options 'c0' - 's' have undefined sizes".into());
                    }
                    Item::Chars(Some(n)) => total += n,
                    _ => total += size,
                }
            }
            Ok(total as i64)
        })?,
    )?;
    Ok(t)
}
