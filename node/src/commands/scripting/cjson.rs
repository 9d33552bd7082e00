//! `cjson`: JSON encode/decode with lua-cjson 2.1's behaviour as Redis
//! embeds it (`cjson.null`, sparse-array rules, depth limits, invalid
//! numbers, `%.14g` numbers, `/` escaped).

use mlua::{LightUserData, Lua, Table, Value};
use std::cell::Cell;
use std::rc::Rc;

struct Config {
    encode_max_depth: Cell<u32>,
    decode_max_depth: Cell<u32>,
    encode_invalid_numbers: Cell<bool>,
    decode_invalid_numbers: Cell<bool>,
    encode_keep_buffer: Cell<bool>,
    encode_number_precision: Cell<u32>,
    sparse_convert: Cell<bool>,
    sparse_ratio: Cell<u32>,
    sparse_safe: Cell<u32>,
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn rt<T>(m: String) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(m))
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Rc::new(Config {
        encode_max_depth: Cell::new(1000),
        decode_max_depth: Cell::new(1000),
        encode_invalid_numbers: Cell::new(false),
        decode_invalid_numbers: Cell::new(true),
        encode_keep_buffer: Cell::new(true),
        encode_number_precision: Cell::new(14),
        sparse_convert: Cell::new(false),
        sparse_ratio: Cell::new(2),
        sparse_safe: Cell::new(10),
    });
    let t = lua.create_table()?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let mut out = Vec::new();
            encode(&c, &v, 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, s: mlua::String| {
            let bytes = s.as_bytes().to_vec();
            let mut p = Parser { s: &bytes, pos: 0, depth: 0, cfg: &c };
            p.ws();
            let v = p.value(lua)?;
            p.ws();
            if p.pos < bytes.len() {
                return p.err("the end");
            }
            Ok(v)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_max_depth",
        lua.create_function(move |_, n: Option<u32>| {
            if let Some(n) = n {
                c.encode_max_depth.set(n.max(1));
            }
            Ok(c.encode_max_depth.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_max_depth",
        lua.create_function(move |_, n: Option<u32>| {
            if let Some(n) = n {
                c.decode_max_depth.set(n.max(1));
            }
            Ok(c.decode_max_depth.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        lua.create_function(move |_, n: Option<u32>| {
            if let Some(n) = n {
                if !(1..=14).contains(&n) {
                    return rt("bad argument #1 to '?' (expected integer between 1 and 14)".into());
                }
                c.encode_number_precision.set(n);
            }
            Ok(c.encode_number_precision.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(move |_, b: Option<Value>| {
            if let Some(v) = b {
                c.encode_keep_buffer.set(truthy(&v));
            }
            Ok(c.encode_keep_buffer.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_invalid_numbers",
        lua.create_function(move |_, b: Option<Value>| {
            if let Some(v) = b {
                c.encode_invalid_numbers.set(truthy(&v));
            }
            Ok(c.encode_invalid_numbers.get())
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode_invalid_numbers",
        lua.create_function(move |_, b: Option<Value>| {
            if let Some(v) = b {
                c.decode_invalid_numbers.set(truthy(&v));
            }
            Ok(c.decode_invalid_numbers.get())
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(move |_, (convert, ratio, safe): (Option<Value>, Option<u32>, Option<u32>)| {
            if let Some(v) = convert {
                c.sparse_convert.set(truthy(&v));
            }
            if let Some(r) = ratio {
                c.sparse_ratio.set(r);
            }
            if let Some(s) = safe {
                c.sparse_safe.set(s);
            }
            Ok((c.sparse_convert.get(), c.sparse_ratio.get(), c.sparse_safe.get()))
        })?,
    )?;
    Ok(t)
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Boolean(b) => *b,
        Value::String(s) => &*s.as_bytes() == b"on",
        Value::Nil => false,
        _ => true,
    }
}

fn fmt_num(n: f64, precision: u32) -> String {
    crate::protocol::format_g(n, precision as usize)
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            8 => out.extend_from_slice(b"\\b"),
            12 => out.extend_from_slice(b"\\f"),
            0..=31 | 127 => out.extend_from_slice(format!("\\u{:04x}", b).as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// The array length of a table, or None when it must be an object
/// (lua-cjson's `lua_array_length`).
fn array_length(cfg: &Config, t: &Table) -> mlua::Result<Option<usize>> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(n);
        items += 1;
    }
    let ratio = cfg.sparse_ratio.get() as usize;
    if ratio > 0 && max > items * ratio && max > cfg.sparse_safe.get() as usize {
        if !cfg.sparse_convert.get() {
            return rt("Cannot serialise table: excessively sparse array".into());
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn encode(cfg: &Config, v: &Value, depth: u32, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(fmt_num(*i as f64, cfg.encode_number_precision.get()).as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                if !cfg.encode_invalid_numbers.get() {
                    return rt("Cannot serialise number: must not be NaN or Inf".into());
                }
                if n.is_nan() {
                    out.extend_from_slice(b"nan");
                    return Ok(());
                }
            }
            out.extend_from_slice(fmt_num(*n, cfg.encode_number_precision.get()).as_bytes());
        }
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth.get() {
                return rt(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(cfg, t)? {
                Some(len) if len > 0 || t.clone().pairs::<Value, Value>().next().is_none() => {
                    if len == 0 {
                        out.extend_from_slice(b"{}");
                        return Ok(());
                    }
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let e: Value = t.raw_get(i)?;
                        encode(cfg, &e, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, val) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => encode_string(&s.as_bytes(), out),
                            Value::Integer(i) => {
                                out.push(b'"');
                                out.extend_from_slice(fmt_num(*i as f64, cfg.encode_number_precision.get()).as_bytes());
                                out.push(b'"');
                            }
                            Value::Number(n) => {
                                out.push(b'"');
                                out.extend_from_slice(fmt_num(*n, cfg.encode_number_precision.get()).as_bytes());
                                out.push(b'"');
                            }
                            other => {
                                return rt(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    other.type_name()
                                ));
                            }
                        }
                        out.push(b':');
                        encode(cfg, &val, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return rt(format!("Cannot serialise {}: type not supported", other.type_name())),
    }
    Ok(())
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: u32,
    cfg: &'a Config,
}

impl Parser<'_> {
    fn err<T>(&self, expected: &str) -> mlua::Result<T> {
        let rest = &self.s[self.pos.min(self.s.len())..];
        let found = match rest.first() {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b',') => "T_COMMA",
            Some(b':') => "T_COLON",
            Some(b'"') => "T_STRING",
            Some(b'-' | b'0'..=b'9') => "T_NUMBER",
            Some(_) if rest.starts_with(b"true") || rest.starts_with(b"false") => "T_BOOLEAN",
            Some(_) if rest.starts_with(b"null") => "T_NULL",
            Some(_) => "invalid token",
        };
        rt(format!("Expected {expected} but found {found} at character {}", self.pos + 1))
    }

    fn ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn lit(&mut self, word: &[u8]) -> bool {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth.get() {
            return rt(format!("Found too many nested data structures ({}) at character {}", self.depth, self.pos + 1));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let Some(&c) = self.s.get(self.pos) else {
            return self.err("value");
        };
        match c {
            b'{' => {
                self.enter()?;
                self.pos += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.ws();
                    if self.s.get(self.pos) != Some(&b'"') {
                        return self.err("object key string");
                    }
                    let k = self.string(lua)?;
                    self.ws();
                    if self.s.get(self.pos) != Some(&b':') {
                        return self.err("colon");
                    }
                    self.pos += 1;
                    self.ws();
                    let v = self.value(lua)?;
                    t.raw_set(k, v)?;
                    self.ws();
                    match self.s.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return self.err("comma or object end"),
                    }
                }
                self.depth -= 1;
                Ok(Value::Table(t))
            }
            b'[' => {
                self.enter()?;
                self.pos += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1;
                loop {
                    self.ws();
                    let v = self.value(lua)?;
                    t.raw_set(i, v)?;
                    i += 1;
                    self.ws();
                    match self.s.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return self.err("comma or array end"),
                    }
                }
                self.depth -= 1;
                Ok(Value::Table(t))
            }
            b'"' => self.string(lua),
            b't' if self.lit(b"true") => Ok(Value::Boolean(true)),
            b'f' if self.lit(b"false") => Ok(Value::Boolean(false)),
            b'n' if self.lit(b"null") => Ok(null()),
            b'-' | b'0'..=b'9' | b'i' | b'n' | b'I' | b'N' => self.number(),
            _ => self.err("value"),
        }
    }

    fn number(&mut self) -> mlua::Result<Value> {
        let start = self.pos;
        while self.pos < self.s.len()
            && matches!(self.s[self.pos], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9' | b'x' | b'X' | b'a'..=b'd' | b'f' | b'A'..=b'D' | b'F' | b'i' | b'n' | b'I' | b'N' | b't' | b'y')
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let special = matches!(lower.trim_start_matches('-'), "inf" | "infinity" | "nan");
        if special && !self.cfg.decode_invalid_numbers.get() {
            self.pos = start;
            return self.err("value");
        }
        let n: f64 = match lower.as_str() {
            "inf" | "infinity" => f64::INFINITY,
            "-inf" | "-infinity" => f64::NEG_INFINITY,
            "nan" | "-nan" => f64::NAN,
            _ => match text.parse() {
                Ok(n) => n,
                Err(_) => {
                    self.pos = start;
                    return self.err("value");
                }
            },
        };
        Ok(Value::Number(n))
    }

    fn string(&mut self, lua: &Lua) -> mlua::Result<Value> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return rt(format!("Expected string but found unexpected end of string at character {}", self.pos + 1));
            };
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return self.err("string");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp) && self.s[self.pos..].starts_with(b"\\u") {
                                self.pos += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return rt(format!(
                                "Expected value but found invalid escape code at character {}",
                                self.pos
                            ));
                        }
                    }
                }
                _ => out.push(c),
            }
        }
        Ok(Value::String(lua.create_string(&out)?))
    }

    fn hex4(&mut self) -> mlua::Result<u32> {
        let h = self.s.get(self.pos..self.pos + 4).and_then(|h| std::str::from_utf8(h).ok());
        match h.and_then(|h| u32::from_str_radix(h, 16).ok()) {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => rt(format!("Expected value but found invalid unicode escape code at character {}", self.pos)),
        }
    }
}
