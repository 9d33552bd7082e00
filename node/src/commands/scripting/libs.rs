//! The libraries Redis scripts may use beyond Lua's own: `bit` (LuaBitOp),
//! `cjson`, `cmsgpack` and `struct`, written here in Rust against the same
//! behaviour as the C modules Redis embeds, as far as Redis's tests and
//! common scripts use them.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

pub fn install(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    globals.raw_set("bit", bit(lua)?)?;
    globals.raw_set("cjson", super::cjson::module(lua)?)?;
    globals.raw_set("cmsgpack", super::cmsgpack::module(lua)?)?;
    globals.raw_set("struct", super::lstruct::module(lua)?)?;
    Ok(())
}

/// A Lua number as LuaBitOp normalizes it: to a 32-bit integer, wrapping.
pub fn tobit(v: &Value) -> mlua::Result<i32> {
    let n = match v {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        Value::String(s) => {
            let t = String::from_utf8_lossy(&s.as_bytes()).trim().to_string();
            t.parse::<f64>()
                .map_err(|_| mlua::Error::RuntimeError("bad argument (number expected, got string)".into()))?
        }
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "bad argument (number expected, got {})",
                other.type_name()
            )));
        }
    };
    // LuaBitOp adds 2^52+2^51 and takes the low 32 bits: rounds to nearest.
    let r = n.round_ties_even();
    Ok((r.rem_euclid(4294967296.0) as u64 as u32) as i32)
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("tobit", lua.create_function(|_, v: Value| Ok(tobit(&v)? as i64))?)?;
    t.raw_set("bnot", lua.create_function(|_, v: Value| Ok(!tobit(&v)? as i64))?)?;
    fn fold(args: &Variadic<Value>, f: fn(i32, i32) -> i32) -> mlua::Result<i64> {
        let mut it = args.iter();
        let first = it
            .next()
            .ok_or_else(|| mlua::Error::RuntimeError("bad argument #1 (number expected, got no value)".into()))?;
        let mut acc = tobit(first)?;
        for v in it {
            acc = f(acc, tobit(v)?);
        }
        Ok(acc as i64)
    }
    t.raw_set("band", lua.create_function(|_, a: Variadic<Value>| fold(&a, |x, y| x & y))?)?;
    t.raw_set("bor", lua.create_function(|_, a: Variadic<Value>| fold(&a, |x, y| x | y))?)?;
    t.raw_set("bxor", lua.create_function(|_, a: Variadic<Value>| fold(&a, |x, y| x ^ y))?)?;
    fn shift(f: fn(u32, u32) -> u32) -> impl Fn(&Lua, (Value, Value)) -> mlua::Result<i64> {
        move |_, (x, n)| Ok(f(tobit(&x)? as u32, (tobit(&n)? & 31) as u32) as i32 as i64)
    }
    t.raw_set("lshift", lua.create_function(shift(|x, n| x << n))?)?;
    t.raw_set("rshift", lua.create_function(shift(|x, n| x >> n))?)?;
    t.raw_set("arshift", lua.create_function(shift(|x, n| ((x as i32) >> n) as u32))?)?;
    t.raw_set("rol", lua.create_function(shift(|x, n| x.rotate_left(n)))?)?;
    t.raw_set("ror", lua.create_function(shift(|x, n| x.rotate_right(n)))?)?;
    t.raw_set("bswap", lua.create_function(|_, v: Value| Ok((tobit(&v)? as u32).swap_bytes() as i32 as i64))?)?;
    t.raw_set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let mut it = args.into_iter();
            let x = tobit(&it.next().unwrap_or(Value::Nil))? as u32;
            let n = match it.next() {
                None | Some(Value::Nil) => 8,
                Some(v) => tobit(&v)?,
            };
            let upper = n < 0;
            let n = n.unsigned_abs().min(8) as usize;
            let s = if upper { format!("{x:08X}") } else { format!("{x:08x}") };
            lua.create_string(&s[8 - n..])
        })?,
    )?;
    Ok(t)
}
