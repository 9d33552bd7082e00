//! `cmsgpack`: MessagePack pack/unpack as lua-cmsgpack 0.4 (the version
//! Redis embeds): integers in the smallest encoding, floats as float32 when
//! exact, tables as arrays when their keys are 1..n, nesting cut at 16.

use mlua::{Lua, MultiValue, Table, Value};

const MAX_NESTING: usize = 16;

fn rt<T>(m: &str) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(m.to_string()))
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return rt("bad argument #0 to 'pack' (MessagePack pack needs input.)");
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set("unpack", lua.create_function(|lua, s: mlua::String| unpack_full(lua, &s.as_bytes(), 0, 0, true))?)?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            unpack_full(lua, &s.as_bytes(), 1, offset.unwrap_or(0), false)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (mlua::String, i64, Option<i64>)| {
            unpack_full(lua, &s.as_bytes(), limit, offset.unwrap_or(0), false)
        })?,
    )?;
    Ok(t)
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        let u = n as u64;
        if u <= 127 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    if n.is_finite() && n == (n as i64) as f64 {
        encode_int(n as i64, out);
    } else if (n as f32) as f64 == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// `Some(n)` when the table's keys are exactly 1..n.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let mut count = 0usize;
    let mut max = 0usize;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) if i > 0 => i as usize,
            Value::Number(n) if n > 0.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        count += 1;
        max = max.max(n);
    }
    Ok((max == count).then_some(count))
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Table(t) if level < MAX_NESTING => match array_len(t)? {
            Some(n) => {
                if n <= 15 {
                    out.push(0x90 | n as u8);
                } else if n <= 0xffff {
                    out.push(0xdc);
                    out.extend_from_slice(&(n as u16).to_be_bytes());
                } else {
                    out.push(0xdd);
                    out.extend_from_slice(&(n as u32).to_be_bytes());
                }
                for i in 1..=n {
                    let e: Value = t.raw_get(i)?;
                    encode(&e, level + 1, out)?;
                }
            }
            None => {
                // Two passes: holding every key at once would exhaust the
                // interpreter's reference stack on big tables.
                let mut n = 0usize;
                for pair in t.clone().pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                if n <= 15 {
                    out.push(0x80 | n as u8);
                } else if n <= 0xffff {
                    out.push(0xde);
                    out.extend_from_slice(&(n as u16).to_be_bytes());
                } else {
                    out.push(0xdf);
                    out.extend_from_slice(&(n as u32).to_be_bytes());
                }
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    encode(&k, level + 1, out)?;
                    encode(&val, level + 1, out)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

enum DecodeErr {
    Eof,
    Bad,
}

struct Cur<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cur<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeErr> {
        let end = self.pos.checked_add(n).ok_or(DecodeErr::Eof)?;
        let b = self.s.get(self.pos..end).ok_or(DecodeErr::Eof)?;
        self.pos = end;
        Ok(b)
    }

    fn u8(&mut self) -> Result<u8, DecodeErr> {
        Ok(self.take(1)?[0])
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeErr> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }
}

fn decode(lua: &Lua, c: &mut Cur<'_>) -> Result<mlua::Result<Value>, DecodeErr> {
    let b = c.u8()?;
    let int = |i: i64| Ok(Ok(Value::Integer(i)));
    match b {
        0x00..=0x7f => int(b as i64),
        0xe0..=0xff => int(b as i8 as i64),
        0xcc => int(c.be(1)? as i64),
        0xcd => int(c.be(2)? as i64),
        0xce => int(c.be(4)? as i64),
        0xcf => {
            let u = c.be(8)?;
            if u > i64::MAX as u64 { Ok(Ok(Value::Number(u as f64))) } else { int(u as i64) }
        }
        0xd0 => int(c.be(1)? as u8 as i8 as i64),
        0xd1 => int(c.be(2)? as u16 as i16 as i64),
        0xd2 => int(c.be(4)? as u32 as i32 as i64),
        0xd3 => int(c.be(8)? as i64),
        0xc0 => Ok(Ok(Value::Nil)),
        0xc2 => Ok(Ok(Value::Boolean(false))),
        0xc3 => Ok(Ok(Value::Boolean(true))),
        0xca => Ok(Ok(Value::Number(f32::from_bits(c.be(4)? as u32) as f64))),
        0xcb => Ok(Ok(Value::Number(f64::from_bits(c.be(8)?)))),
        0xa0..=0xbf | 0xd9 | 0xda | 0xdb | 0xc4 | 0xc5 | 0xc6 => {
            let n = match b {
                0xa0..=0xbf => (b & 0x1f) as usize,
                0xd9 | 0xc4 => c.be(1)? as usize,
                0xda | 0xc5 => c.be(2)? as usize,
                _ => c.be(4)? as usize,
            };
            let s = c.take(n)?;
            Ok(lua.create_string(s).map(Value::String))
        }
        0x90..=0x9f | 0xdc | 0xdd => {
            let n = match b {
                0x90..=0x9f => (b & 0x0f) as usize,
                0xdc => c.be(2)? as usize,
                _ => c.be(4)? as usize,
            };
            let t = match lua.create_table() {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            for i in 1..=n {
                let v = match decode(lua, c)? {
                    Ok(v) => v,
                    Err(e) => return Ok(Err(e)),
                };
                if let Err(e) = t.raw_set(i, v) {
                    return Ok(Err(e));
                }
            }
            Ok(Ok(Value::Table(t)))
        }
        0x80..=0x8f | 0xde | 0xdf => {
            let n = match b {
                0x80..=0x8f => (b & 0x0f) as usize,
                0xde => c.be(2)? as usize,
                _ => c.be(4)? as usize,
            };
            let t = match lua.create_table() {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            for _ in 0..n {
                let k = match decode(lua, c)? {
                    Ok(v) => v,
                    Err(e) => return Ok(Err(e)),
                };
                let v = match decode(lua, c)? {
                    Ok(v) => v,
                    Err(e) => return Ok(Err(e)),
                };
                if !k.is_nil()
                    && let Err(e) = t.raw_set(k, v)
                {
                    return Ok(Err(e));
                }
            }
            Ok(Ok(Value::Table(t)))
        }
        _ => Err(DecodeErr::Bad),
    }
}

fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64, all: bool) -> mlua::Result<MultiValue> {
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        return rt(&format!("Invalid request to unpack with offset of {offset} and limit of {len}."));
    }
    if offset > len {
        return rt(&format!("Start offset {offset} greater than input length {len}."));
    }
    let limit = if all { i64::MAX } else { limit };
    let mut c = Cur { s, pos: offset as usize };
    let mut out = MultiValue::new();
    let mut count = 0;
    while c.pos < s.len() && count < limit {
        match decode(lua, &mut c) {
            Ok(v) => out.push_back(v?),
            Err(DecodeErr::Eof) => return rt("Missing bytes in input."),
            Err(DecodeErr::Bad) => return rt("Bad data format in input."),
        }
        count += 1;
    }
    if !all {
        let next = if c.pos >= s.len() { -1 } else { c.pos as i64 };
        out.push_front(Value::Integer(next));
    }
    Ok(out)
}
