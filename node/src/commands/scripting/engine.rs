//! The Lua interpreter: one per worker thread, created on first use.
//!
//! Sandbox as Redis 7.0: base, table, string and math libraries plus
//! cjson, cmsgpack, bit and struct; no os, io, package or debug; globals
//! are read-only (`Attempt to modify a readonly table`) and reading a
//! missing one is an error. `redis.call`/`redis.pcall` run real command
//! handlers under the script's locks; replies cross between RESP and Lua
//! by Redis 7.0's conversion rules.

use super::resp::{Resp, parse};
use super::{RunState, Scripts};
use crate::commands::pipeline::{self, Origin, Refusal, Refused, ScriptCall};
use crate::commands::{CmdError, CmdResult, Ctx, err, flags};
use crate::protocol::Reply;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

pub enum Target<'a> {
    Eval { sha: &'a str, body: &'a [u8] },
    Function { name: &'a str },
}

pub struct Run<'a> {
    pub target: Target<'a>,
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    pub read_only: bool,
    pub check_oom_upfront: bool,
    pub check_replicas_upfront: bool,
    pub command: &'static str,
}

/// Lua code run once per interpreter: the `redis` API's Lua half, the
/// read-only globals, and the protected runner.
const PRELUDE: &str = r#"
local priv, G, api, load_api = ...
local error, type, tostring, rawget, setmetatable, select, unpack, xpcall, pairs =
      error, type, tostring, rawget, setmetatable, select, unpack, xpcall, pairs

local function fail(m) error({err = 'ERR ' .. m}) end

local function error_table(e)
  if e:sub(1, 1) ~= '-' then e = '-' .. e end
  local m
  if not e:find(' ', 1, true) then m = 'ERR ' .. e:sub(2) else m = e:sub(2) end
  m = (m:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', ''))
  return {err = m}
end

priv.api = api
api.error_reply = function(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return error_table((...))
end
api.status_reply = function(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = (...)}
end
api.replicate_commands = function() return true end
api.breakpoint = function() return false end
api.debug = function() end

local consts = {
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
}
for k, v in pairs(consts) do api[k] = v end
for _, k in pairs({'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  load_api[k] = api[k]
end
load_api.log = api.log

local function register_outside_load()
  fail('redis.register_function can only be called on FUNCTION LOAD command')
end
local valid_flags = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}
load_api.register_function = function(...)
  if not priv.loading then register_outside_load() end
  local n = select('#', ...)
  local name, cb, flags, desc
  if n == 1 then
    local t = ...
    if type(t) ~= 'table' then
      fail('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
    end
    for k, v in pairs(t) do
      if k == 'function_name' then
        if type(v) ~= 'string' then fail('function_name argument given to redis.register_function must be a string') end
        name = v
      elseif k == 'callback' then
        if type(v) ~= 'function' then fail('callback argument given to redis.register_function must be a function') end
        cb = v
      elseif k == 'flags' then
        if type(v) ~= 'table' then fail('flags argument to redis.register_function must be a table representing function flags') end
        flags = v
      elseif k == 'description' then
        if type(v) ~= 'string' then fail('description argument given to redis.register_function must be a string') end
        desc = v
      else
        fail('unknown argument given to redis.register_function')
      end
    end
    if not name then fail('redis.register_function must get a function name argument') end
    if not cb then fail('redis.register_function must get a callback argument') end
  elseif n == 2 then
    name, cb = ...
    if type(name) ~= 'string' and type(name) ~= 'number' then fail('first argument to redis.register_function must be a string') end
    name = tostring(name)
    if type(cb) ~= 'function' then fail('second argument to redis.register_function must be a function') end
  else
    fail('wrong number of arguments to redis.register_function')
  end
  local fl = {}
  if flags then
    for _, f in pairs(flags) do
      if type(f) ~= 'string' or not valid_flags[f] then fail('unknown flag given') end
      fl[#fl + 1] = f
    end
  end
  if name == '' or name:find('[^%w_]') then
    fail('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  local key = name:lower()
  if priv.pending[key] then fail('Function already exists in the library') end
  priv.pending[key] = {cb, fl, desc, name}
end

local protected = setmetatable({}, {__mode = 'k'})
local function deny() error('Attempt to modify a readonly table', 2) end
-- A read-only view of `mt`, for getmetatable on protected tables.
local function metatable_view(mt)
  local view = setmetatable({}, {__index = mt, __newindex = deny, __metatable = false})
  protected[view] = true
  mt.__metatable = view
  return mt
end
local function readonly(t, strict)
  local index = t
  if strict then
    index = function(_, n)
      local v = rawget(t, n)
      if v == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 2)
      end
      return v
    end
  end
  local ro = setmetatable({}, metatable_view({__index = index, __newindex = deny}))
  protected[ro] = true
  return ro
end

for _, lib in pairs({'string', 'math', 'table', 'cjson', 'cmsgpack', 'bit', 'struct'}) do
  if rawget(G, lib) then G[lib] = readonly(G[lib]) end
end
getmetatable('').__index = G.string
local api_ro, load_ro = readonly(api), readonly(load_api, true)
local proxy = setmetatable({}, metatable_view({
  __index = function(_, n)
    if n == 'redis' then
      if priv.loading then return load_ro end
      return api_ro
    end
    -- While a library loads, only its `redis` API is visible.
    if priv.loading then
      error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 2)
    end
    local v = rawget(G, n)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(n) .. "'", 2)
    end
    return v
  end,
  __newindex = deny,
}))
protected[proxy] = true
G._G = proxy
local raw_rawset, raw_setmetatable, raw_loadstring = rawset, setmetatable, loadstring
G.rawset = function(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return raw_rawset(t, k, v)
end
G.setmetatable = function(t, mt)
  if protected[t] then error('Attempt to modify a readonly table', 2) end
  return raw_setmetatable(t, mt)
end
-- Binary (precompiled) chunks are refused, as in Redis.
G.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary chunks are not allowed' end
  return raw_loadstring(s, name)
end

priv.run = function(f, ...)
  local n = select('#', ...)
  local args = {...}
  return xpcall(function() return f(unpack(args, 1, n)) end, priv.handler)
end
return proxy
"#;

/// A worker thread's interpreter and what it compiled.
struct Vm {
    lua: Lua,
    /// The `Scripts` this interpreter serves (a process may run several nodes).
    owner: usize,
    cache_gen: u64,
    scripts: HashMap<String, Function>,
    lib_gen: u64,
    functions: HashMap<String, Function>,
    /// Internal table the prelude and Rust share (never visible to scripts).
    private: Table,
    /// The real globals behind the read-only view.
    globals: Table,
    /// Scripts run (for the periodic garbage collection step).
    runs: u64,
    /// Interpreter memory after the last full collection.
    mem_after_gc: usize,
}

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

fn lua_err(e: mlua::Error) -> CmdError {
    format!("ERR {}", error_text(&e)).into()
}

/// The message of an error raised by Rust code or by Lua.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        other => other.to_string(),
    }
}

impl Vm {
    fn new(owner: usize) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let globals = lua.globals();
        for name in ["dofile", "loadfile", "require", "module", "newproxy", "print", "setfenv", "getfenv"] {
            globals.raw_set(name, Value::Nil)?;
        }
        super::libs::install(&lua, &globals)?;
        let private = lua.create_table()?;
        let api = lua.create_table()?;
        let load_api = lua.create_table()?;
        api.raw_set("REDIS_VERSION", crate::commands::REDIS_VERSION)?;
        api.raw_set("REDIS_VERSION_NUM", 0x07000f)?;
        install_api(&lua, &api, &private)?;
        private.raw_set("handler", lua.create_function(error_handler)?)?;
        private.raw_set("pending", lua.create_table()?)?;
        let proxy: Table =
            lua.load(PRELUDE).set_name("=redis").call((private.clone(), globals.clone(), api, load_api))?;
        lua.set_globals(proxy)?;
        Ok(Vm {
            lua,
            owner,
            cache_gen: u64::MAX,
            scripts: HashMap::new(),
            lib_gen: u64::MAX,
            functions: HashMap::new(),
            private,
            globals,
            runs: 0,
            mem_after_gc: 0,
        })
    }

    /// Drops compiled scripts after SCRIPT FLUSH; reloads libraries after
    /// any FUNCTION change.
    fn sync(&mut self, scripts: &Scripts) -> CmdResult {
        let gen_now = scripts.cache_gen.load(SeqCst);
        if gen_now != self.cache_gen {
            self.scripts.clear();
            self.cache_gen = gen_now;
        }
        let lib_now = scripts.lib_gen.load(SeqCst);
        if lib_now != self.lib_gen {
            self.functions.clear();
            let libs: Vec<_> = scripts.libraries.lock().values().cloned().collect();
            for lib in libs {
                match self.load_library(&lib.code) {
                    Ok(funcs) => {
                        for (name, f, _, _) in funcs {
                            self.functions.insert(name.to_ascii_lowercase(), f);
                        }
                    }
                    Err(e) => tracing::warn!("library {} failed to load in a worker: {}", lib.name, e.0),
                }
            }
            self.lib_gen = lib_now;
        }
        Ok(())
    }

    fn compile(&self, body: &[u8], name: &str) -> Result<Function, String> {
        // A shebang line is blanked, keeping line numbers.
        let code: Vec<u8> = if body.starts_with(b"#!") {
            let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
            body[end..].to_vec()
        } else {
            body.to_vec()
        };
        self.lua.load(code).set_name(name).into_function().map_err(|e| error_text(&e))
    }

    fn script(&mut self, sha: &str, body: &[u8]) -> Result<Function, CmdError> {
        if let Some(f) = self.scripts.get(sha) {
            return Ok(f.clone());
        }
        let f = self
            .compile(body, "@user_script")
            .map_err(|m| CmdError::from(format!("ERR Error compiling script (new function): {m}")))?;
        self.scripts.insert(sha.to_string(), f.clone());
        Ok(f)
    }

    /// Runs a library's code with the loading API; returns the functions it
    /// registered: (name, callback, flags, description).
    #[allow(clippy::type_complexity)]
    fn load_library(&mut self, code: &[u8]) -> Result<Vec<(String, Function, Vec<String>, Option<Vec<u8>>)>, CmdError> {
        let f = self
            .compile(code, "@user_function")
            .map_err(|m| CmdError::from(format!("ERR Error compiling function: {m}")))?;
        let p = &self.private;
        let pending = self.lua.create_table().map_err(lua_err)?;
        p.raw_set("pending", pending.clone()).map_err(lua_err)?;
        p.raw_set("loading", true).map_err(lua_err)?;
        let started = std::time::Instant::now();
        self.lua
            .set_hook(HookTriggers::new().every_nth_instruction(100_000), move |_, _| {
                if started.elapsed() > std::time::Duration::from_millis(500) {
                    return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
                }
                Ok(VmState::Continue)
            })
            .map_err(lua_err)?;
        let runner: mlua::Result<Function> = p.raw_get("run");
        let result = runner.and_then(|r| r.call::<MultiValue>(f));
        self.lua.remove_hook();
        p.raw_set("loading", false).map_err(lua_err)?;
        let result = result.map_err(lua_err)?;
        let mut it = result.into_iter();
        if !matches!(it.next(), Some(Value::Boolean(true))) {
            let msg = match it.next() {
                Some(Value::Table(t)) => t.raw_get::<String>("err").unwrap_or_default(),
                _ => "ERR unknown error".into(),
            };
            return Err(format!("ERR Error registering functions: {msg}").into());
        }
        let mut out = Vec::new();
        for pair in pending.pairs::<String, Table>() {
            let (_, t) = pair.map_err(lua_err)?;
            let name: String = t.raw_get(4).map_err(lua_err)?;
            let cb: Function = t.raw_get(1).map_err(lua_err)?;
            let fl: Table = t.raw_get(2).map_err(lua_err)?;
            let flags: Vec<String> = fl.sequence_values::<String>().filter_map(|f| f.ok()).collect();
            let desc: Option<mlua::String> = t.raw_get(3).map_err(lua_err)?;
            out.push((name, cb, flags, desc.map(|d| d.as_bytes().to_vec())));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// Runs `f` with this thread's interpreter for the node's `scripts`.
fn with_vm<R>(scripts: &Scripts, f: impl FnOnce(&mut Vm) -> Result<R, CmdError>) -> Result<R, CmdError> {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let owner = scripts as *const Scripts as usize;
        if slot.as_ref().is_none_or(|vm| vm.owner != owner) {
            *slot = Some(Vm::new(owner).map_err(lua_err)?);
        }
        let vm = slot.as_mut().expect("interpreter just created");
        vm.sync(scripts)?;
        f(vm)
    })
}

/// SCRIPT LOAD: the body must compile.
pub fn check_compiles(ctx: &Ctx<'_>, body: &[u8]) -> CmdResult {
    with_vm(&ctx.node.scripts, |vm| {
        vm.compile(body, "@user_script")
            .map(|_| ())
            .map_err(|m| format!("ERR Error compiling script (new function): {m}").into())
    })
}

/// FUNCTION LOAD: runs the library's code here and returns what it
/// registered (name, flags, description).
/// A function a library registered: name, flags, description.
pub type Registered = (String, Vec<String>, Option<Vec<u8>>);

pub fn load_library(ctx: &Ctx<'_>, code: &[u8]) -> Result<Vec<Registered>, CmdError> {
    with_vm(&ctx.node.scripts, |vm| {
        let funcs = vm.load_library(code)?;
        Ok(funcs.into_iter().map(|(n, _, fl, d)| (n, fl, d)).collect())
    })
}

fn raise<T>(m: &str) -> mlua::Result<T> {
    Err(mlua::Error::external(RedisError(format!("ERR {m}"))))
}

fn number_arg(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// The `redis` functions written in Rust (errors raised from a C function,
/// as Redis's, so they report the script's line).
fn install_api(lua: &Lua, api: &Table, private: &Table) -> mlua::Result<()> {
    api.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise("wrong number of arguments");
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => fmt_number(*n).into_bytes(),
                _ => Vec::new(),
            };
            lua.create_string(super::sha1_hex(&bytes))
        })?,
    )?;
    api.raw_set(
        "log",
        lua.create_function(|_, args: MultiValue| {
            if args.len() < 2 {
                return raise("redis.log() requires two arguments or more.");
            }
            let Some(level) = number_arg(args.front()) else {
                return raise("First argument must be a number (log level).");
            };
            if !(0.0..=3.0).contains(&level) {
                return raise("Invalid debug level.");
            }
            let parts: Vec<String> = args
                .iter()
                .skip(1)
                .map(|v| match v {
                    Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                    Value::Integer(i) => i.to_string(),
                    Value::Number(n) => fmt_number(*n),
                    _ => String::new(),
                })
                .collect();
            let msg = parts.join(" ");
            match level as i64 {
                0 => tracing::debug!(target: "script", "{msg}"),
                1 | 2 => tracing::info!(target: "script", "{msg}"),
                _ => tracing::warn!(target: "script", "{msg}"),
            }
            Ok(())
        })?,
    )?;
    let p = private.clone();
    api.raw_set(
        "setresp",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() != 1 {
                return raise("redis.setresp() requires one argument.");
            }
            match number_arg(args.front()) {
                Some(v) if v == 2.0 || v == 3.0 => p.raw_set("resp", v as i64),
                _ => raise("RESP version must be 2 or 3."),
            }
        })?,
    )?;
    api.raw_set(
        "set_repl",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return raise("redis.set_repl() requires one argument.");
            }
            match number_arg(args.front()) {
                Some(v) if (0.0..=3.0).contains(&v) => Ok(()),
                _ => raise("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."),
            }
        })?,
    )?;
    Ok(())
}

/// The error handler of every run: turns any error into Redis's error
/// table `{err=..., source=..., line=...}`, with where it was raised.
fn error_handler(lua: &Lua, e: Value) -> mlua::Result<Table> {
    // Where it was raised: the innermost Lua frame not in the prelude.
    let mut frame: Option<(String, String, i64)> = None;
    for level in 1..32 {
        let Some((what, source, short, line)) = lua.inspect_stack(level, |d| {
            let s = d.source();
            (
                s.what,
                s.source.map(|x| x.into_owned()),
                s.short_src.map(|x| x.into_owned()),
                d.current_line().map(|l| l as i64).unwrap_or(-1),
            )
        }) else {
            break;
        };
        if what != "C" && source.as_deref() != Some("=redis") {
            if let Some(src) = source {
                frame = Some((src, short.unwrap_or_default(), line));
            }
            break;
        }
    }
    let t = match e {
        Value::Table(t) => t,
        Value::Error(ref err) if redis_error(err).is_some() => {
            let t = lua.create_table()?;
            t.raw_set("err", redis_error(err).unwrap_or_default())?;
            t.raw_set(COUNTED, true)?;
            t
        }
        other => {
            let msg = match &other {
                Value::String(s) => s.as_bytes().to_vec(),
                // Raised by a library function (C in Redis): luaL_error's
                // position prefix is the calling script's line.
                Value::Error(e) => match &frame {
                    Some((_, short, line)) if *line > 0 => format!("{short}:{line}: {}", error_text(e)).into_bytes(),
                    _ => error_text(e).into_bytes(),
                },
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => fmt_number(*n).into_bytes(),
                Value::Nil => b"nil".to_vec(),
                Value::Boolean(b) => b.to_string().into_bytes(),
                _ => b"execution failure".to_vec(),
            };
            let t = lua.create_table()?;
            let mut m = b"ERR ".to_vec();
            m.extend_from_slice(&msg);
            t.raw_set("err", lua.create_string(&m)?)?;
            t
        }
    };
    if let Some((src, _, line)) = frame {
        t.raw_set("source", src)?;
        t.raw_set("line", line)?;
    }
    Ok(t)
}

/// Formats a Lua number the way Redis passes it as a command argument.
fn fmt_number(n: f64) -> String {
    crate::protocol::format_g(n, 17)
}

/// Decrements the running-scripts count and clears the running script's
/// state on every way out of a run.
struct Active<'a>(&'a RunState, bool);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.started_ms.store(0, SeqCst);
            self.0.kill.store(false, SeqCst);
            self.0.wrote.store(false, SeqCst);
        }
        self.0.active.fetch_sub(1, SeqCst);
    }
}

/// What `redis.call` needs while a script runs.
struct CallCtx<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    /// The script's declared keys: tracked (CLIENT TRACKING) once it calls
    /// a read-only command.
    declared: &'c [&'c [u8]],
    read_only: bool,
    run: &'c RunState,
    private: Table,
}

impl CallCtx<'_, '_> {
    /// Runs one command for the script through the command pipeline; the
    /// reply's bytes, or the error text of a refusal (counted as Redis
    /// counts it: in errorstats, and as a rejected call of that command).
    fn exec(&mut self, argv: &[Vec<u8>], resp3: bool) -> Result<Vec<u8>, String> {
        let ctx = &mut *self.ctx;
        let node = ctx.node;
        let args: SmallVec<[&[u8]; 8]> = argv.iter().map(|a| a.as_slice()).collect();
        let call =
            ScriptCall { read_only: self.read_only, wrote: self.run.wrote.load(SeqCst), declared: self.declared };
        let origin = Origin::Script(&call);
        let resolved = node.table.resolve(&args, usize::MAX);
        let refused = match &resolved {
            None => Some(Refused::Unknown),
            Some(cmd) => match pipeline::admit(node, ctx.worker, ctx.client, cmd, &origin) {
                Ok(()) => None,
                Err(Refusal::Refused(r)) => Some(r),
                Err(Refusal::Wait(_)) => unreachable!("a script's gates never wait (Origin::gates)"),
                Err(Refusal::Forward(_)) => unreachable!("only a client's own commands are forwarded (slot_gate)"),
            },
        };
        if let Some(refused) = refused {
            let msg = refused.message(node, resolved.as_ref(), &args, &origin);
            pipeline::account(ctx.worker, ctx.client, resolved.as_ref(), &origin, &msg);
            return Err(String::from_utf8_lossy(&msg).into_owned());
        }
        let cmd = resolved.expect("admitted");
        if cmd.has(flags::WRITE) {
            self.run.wrote.store(true, SeqCst);
        }
        // A key on disk only that the script did not declare is read
        // synchronously by the lookup (declared ones were read before the
        // script started): correct, at the cost of one wait of this worker.
        ctx.keys.db = ctx.client.db;
        ctx.client.resp3 = resp3;
        let mut r = Reply { buf: Vec::new(), resp3 };
        let result = (cmd.def.handler)(ctx, &args, &mut r);
        pipeline::after_call(ctx, &cmd, &origin, 0, result, &mut r, false);
        Ok(r.buf)
    }
}

/// The field Redis marks the error tables of `redis.call`/`redis.pcall`
/// with: their error was counted (INFO errorstats) where the command
/// failed, so a script that returns or raises one is not counted again.
const COUNTED: &str = "ignore_error_stats_update";

/// An error `redis.call` raises: becomes the error table `{err=...}`.
#[derive(Debug)]
struct RedisError(String);

impl std::fmt::Display for RedisError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedisError {}

/// The message of a `redis.call` error inside an error from Lua.
fn redis_error(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } => redis_error(cause),
        other => other.downcast_ref::<RedisError>().map(|r| r.0.clone()),
    }
}

/// `redis.call` (`raise`) and `redis.pcall`: runs a command; its reply, or
/// the error raised (call) or returned as `{err=...}` (pcall).
fn redis_call(lua: &Lua, st: &RefCell<CallCtx<'_, '_>>, raise: bool, args: MultiValue) -> mlua::Result<Value> {
    let err_table = |m: &str| -> mlua::Result<Value> {
        if raise {
            return Err(mlua::Error::external(RedisError(m.to_string())));
        }
        let t = lua.create_table()?;
        t.raw_set("err", m)?;
        t.raw_set(COUNTED, true)?;
        Ok(Value::Table(t))
    };
    if args.is_empty() {
        return err_table("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    for v in args {
        match v {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Integer(i) => argv.push(i.to_string().into_bytes()),
            Value::Number(n) => argv.push(fmt_number(n).into_bytes()),
            _ => return err_table("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    let mut st = st.borrow_mut();
    let resp3 = script_resp3(&st.private);
    let bytes = match st.exec(&argv, resp3) {
        Ok(b) => b,
        Err(m) => return err_table(&m),
    };
    drop(st);
    match parse(&bytes) {
        Some(Resp::Error(e)) => {
            let m = String::from_utf8_lossy(&e).into_owned();
            let m = m.trim_matches(|c| c == '\r' || c == '\n');
            err_table(m)
        }
        Some(r) => resp_to_lua(lua, r, resp3),
        None => Ok(Value::Nil),
    }
}

fn killed() -> mlua::Error {
    mlua::Error::external(RedisError("ERR Script killed by user with SCRIPT KILL...".into()))
}

/// True after `redis.setresp(3)` in this run.
fn script_resp3(private: &Table) -> bool {
    number(&private.raw_get::<Value>("resp").unwrap_or(Value::Nil)) == Some(3.0)
}

/// A command's reply as Lua sees it (Redis 7.0's conversion table).
fn resp_to_lua(lua: &Lua, r: Resp, resp3: bool) -> mlua::Result<Value> {
    Ok(match r {
        Resp::Status(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", lua.create_string(&s)?)?;
            Value::Table(t)
        }
        Resp::Error(e) => {
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(&e)?)?;
            Value::Table(t)
        }
        Resp::Int(i) => Value::Integer(i),
        Resp::Bulk(b) => Value::String(lua.create_string(&b)?),
        Resp::Null => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Resp::Array(v) => {
            let t = lua.create_table_with_capacity(v.len(), 0)?;
            for (i, e) in v.into_iter().enumerate() {
                t.raw_set(i + 1, resp_to_lua(lua, e, resp3)?)?;
            }
            Value::Table(t)
        }
        Resp::Map(v) => {
            let inner = lua.create_table()?;
            for (k, val) in v {
                inner.raw_set(resp_to_lua(lua, k, resp3)?, resp_to_lua(lua, val, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.raw_set("map", inner)?;
            Value::Table(t)
        }
        Resp::Set(v) => {
            let inner = lua.create_table()?;
            for k in v {
                inner.raw_set(resp_to_lua(lua, k, resp3)?, true)?;
            }
            let t = lua.create_table()?;
            t.raw_set("set", inner)?;
            Value::Table(t)
        }
        Resp::Double(d) => {
            let t = lua.create_table()?;
            t.raw_set("double", d)?;
            Value::Table(t)
        }
        Resp::Bool(b) => Value::Boolean(b),
        Resp::BigNumber(s) => {
            let t = lua.create_table()?;
            t.raw_set("big_number", lua.create_string(&s)?)?;
            Value::Table(t)
        }
        Resp::Verbatim(fmt, text) => {
            let inner = lua.create_table()?;
            inner.raw_set("format", lua.create_string(&fmt)?)?;
            inner.raw_set("string", lua.create_string(&text)?)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
    })
}

/// A script's return value as the client's reply (Redis 7.0's conversion).
fn lua_to_reply(v: &Value, out: &mut Reply, depth: usize, script_resp3: bool) -> mlua::Result<()> {
    match v {
        Value::Nil => out.null(),
        Value::Boolean(b) => {
            // Booleans follow the script's protocol (redis.setresp), the
            // null the client's.
            if script_resp3 {
                out.boolean(*b)
            } else if *b {
                out.int(1)
            } else {
                out.null()
            }
        }
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(*n as i64),
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Table(t) if depth < 1000 => {
            if let Value::String(e) = t.raw_get::<Value>("err")? {
                out.error(&e.as_bytes().to_vec());
            } else if let Value::String(s) = t.raw_get::<Value>("ok")? {
                let s: String = String::from_utf8_lossy(&s.as_bytes())
                    .chars()
                    .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                    .collect();
                out.simple(&s);
            } else if let Some(d) = number(&t.raw_get::<Value>("double")?) {
                out.double(d);
            } else if let Value::String(s) = t.raw_get::<Value>("big_number")? {
                if out.resp3 {
                    out.raw(b"(");
                    let s = s.as_bytes();
                    let clean: Vec<u8> = s.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
                    out.raw(&clean);
                    out.raw(b"\r\n");
                } else {
                    out.bulk(&s.as_bytes());
                }
            } else if let Value::Table(m) = t.raw_get::<Value>("map")? {
                // Counted first, then streamed: holding every key at once
                // would exhaust the interpreter's reference stack.
                let mut n = 0;
                for pair in m.clone().pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                out.map(n);
                for pair in m.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    lua_to_reply(&k, out, depth + 1, script_resp3)?;
                    lua_to_reply(&v, out, depth + 1, script_resp3)?;
                }
            } else if let Value::Table(s) = t.raw_get::<Value>("set")? {
                let mut n = 0;
                for pair in s.clone().pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                out.set(n);
                for pair in s.pairs::<Value, Value>() {
                    let (k, _) = pair?;
                    lua_to_reply(&k, out, depth + 1, script_resp3)?;
                }
            } else {
                let mut n = 0;
                while !t.raw_get::<Value>(n + 1)?.is_nil() {
                    n += 1;
                }
                out.array(n);
                for i in 1..=n {
                    let v: Value = t.raw_get(i)?;
                    lua_to_reply(&v, out, depth + 1, script_resp3)?;
                }
            }
        }
        Value::Table(_) => out.error("ERR reached lua stack limit"),
        _ => out.null(),
    }
    Ok(())
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// Runs a script or function atomically and writes its reply.
pub fn run(ctx: &mut Ctx<'_>, run: Run<'_>, out: &mut Reply) -> CmdResult {
    let node = ctx.node;
    let scripts = &node.scripts;
    if run.check_replicas_upfront && node.config.runtime.lacks_good_replicas() {
        return Err(err::NOREPLICAS.into());
    }
    if run.check_oom_upfront && !pipeline::memory_allows(node, ctx.keys.stats, true, false) {
        return Err(err::OOM.into());
    }
    scripts.run.active.fetch_add(1, SeqCst);
    let mut active = Active(&scripts.run, false);
    // The whole keyspace, taken in order (the declared keys' partitions
    // dispatch took are let go first: nothing ran yet).
    if !ctx.keys.locked.is_all() {
        ctx.keys.locked = node.ks.lock_none();
        ctx.keys.locked = node.ks.lock_all();
    }
    if node.ks.may_pend()
        && let Some(wait) = ctx.keys.pending(run.keys.iter().copied())
    {
        ctx.pending = Some(wait);
        return Ok(());
    }
    let state = &scripts.run;
    let (name, is_fn) = match run.target {
        Target::Eval { sha, .. } => (sha.to_string(), false),
        Target::Function { name, .. } => (name.to_string(), true),
    };
    {
        let mut what = state.what.lock();
        what.0 = name.clone();
        let mut cmd = vec![run.command.to_string(), name.clone(), run.keys.len().to_string()];
        cmd.extend(run.keys.iter().chain(run.argv).map(|a| String::from_utf8_lossy(a).into_owned()));
        what.1 = cmd.join("\u{0}");
    }
    state.kill.store(false, SeqCst);
    state.wrote.store(false, SeqCst);
    state.is_function.store(is_fn, SeqCst);
    state.started_ms.store(crate::store::now_ms().max(1), SeqCst);
    active.1 = true;

    let saved_db = ctx.client.db;
    let saved_resp3 = ctx.client.resp3;
    let saved_in_exec = ctx.in_exec;
    let saved_in_script = ctx.in_script;
    ctx.in_exec = true;
    ctx.in_script = true;
    let caller_resp3 = out.resp3;
    let result = with_vm(scripts, |vm| {
        let func = match run.target {
            Target::Eval { sha, body } => vm.script(sha, body)?,
            Target::Function { name, .. } => vm
                .functions
                .get(&name.to_ascii_lowercase())
                .cloned()
                .ok_or_else(|| CmdError::from("ERR Function not found"))?,
        };
        let lua = &vm.lua;
        let private = vm.private.clone();
        private.raw_set("resp", 2).map_err(lua_err)?;
        let kill_state: Arc<RunState> = scripts.run.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(100_000), move |lua, _| {
            if kill_state.kill.load(SeqCst) {
                // From now on every line raises it, so that a script
                // catching it with pcall cannot go on.
                let _ = lua.set_hook(HookTriggers::new().every_line(), |_, _| Err(killed()));
                return Err(killed());
            }
            Ok(VmState::Continue)
        })
        .map_err(lua_err)?;
        let make_list = |items: &[&[u8]]| -> mlua::Result<Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, a) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(a)?)?;
            }
            Ok(t)
        };
        let keys_t = make_list(run.keys).map_err(lua_err)?;
        let argv_t = make_list(run.argv).map_err(lua_err)?;
        let call_ctx = RefCell::new(CallCtx {
            ctx: &mut *ctx,
            declared: run.keys,
            read_only: run.read_only,
            run: state,
            private: private.clone(),
        });
        let outcome: mlua::Result<MultiValue> = lua.scope(|scope| {
            let api: Table = private.raw_get("api")?;
            let call = scope.create_function(|lua, args: MultiValue| redis_call(lua, &call_ctx, true, args))?;
            api.raw_set("call", call)?;
            let pcall = scope.create_function(|lua, args: MultiValue| redis_call(lua, &call_ctx, false, args))?;
            api.raw_set("pcall", pcall)?;
            let acl = scope.create_function(|_, args: MultiValue| {
                if args.is_empty() {
                    return raise("Please specify at least one argument for this redis lib call");
                }
                let table = &call_ctx.borrow().ctx.node.table;
                let argv: Vec<Vec<u8>> = args
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.as_bytes().to_vec(),
                        Value::Integer(i) => i.to_string().into_bytes(),
                        Value::Number(n) => fmt_number(*n).into_bytes(),
                        _ => Vec::new(),
                    })
                    .collect();
                let args: SmallVec<[&[u8]; 8]> = argv.iter().map(|a| a.as_slice()).collect();
                match table.resolve(&args, usize::MAX) {
                    Some(cmd) if crate::commands::table::arity_ok(cmd.def.arity, args.len()) => {
                        let st = call_ctx.borrow();
                        Ok(crate::commands::acl::check_user(st.ctx.node, &st.ctx.client.user, &cmd).is_ok())
                    }
                    _ => raise("Invalid command passed to redis.acl_check_cmd()"),
                }
            })?;
            api.raw_set("acl_check_cmd", acl)?;
            let runner: Function = private.raw_get("run")?;
            if is_fn {
                runner.call::<MultiValue>((func, keys_t, argv_t))
            } else {
                vm.globals.raw_set("KEYS", keys_t)?;
                vm.globals.raw_set("ARGV", argv_t)?;
                runner.call::<MultiValue>(func)
            }
        });
        lua.remove_hook();
        // A garbage collection step every 50 runs, as Redis does, so that
        // garbage never builds up to a long full cycle.
        // A script that left much garbage (big tables) gets a full cycle.
        vm.runs += 1;
        if vm.runs % 50 == 0 {
            let _ = lua.gc_step_kbytes(1000);
        }
        if lua.used_memory() > (4 * vm.mem_after_gc).max(1 << 20) {
            let _ = lua.gc_collect();
            vm.mem_after_gc = lua.used_memory();
        }
        state.vm_memory.store(lua.used_memory() as u64, SeqCst);
        if let Ok(api) = private.raw_get::<Table>("api") {
            let _ = api.raw_set("call", Value::Nil);
            let _ = api.raw_set("pcall", Value::Nil);
            let _ = api.raw_set("acl_check_cmd", Value::Nil);
        }
        let outcome = outcome.map_err(lua_err)?;
        let mut it = outcome.into_iter();
        let ok = matches!(it.next(), Some(Value::Boolean(true)));
        let value = it.next().unwrap_or(Value::Nil);
        let mut reply = Reply { buf: Vec::new(), resp3: caller_resp3 };
        let counted = |t: &Table| t.raw_get::<Option<bool>>(COUNTED).ok().flatten() == Some(true);
        if ok {
            // An error table returned is the command's error reply (a
            // failed call, counted as such).
            if let Value::Table(t) = &value
                && let Ok(Value::String(e)) = t.raw_get::<Value>("err")
            {
                return Ok(Err((String::from_utf8_lossy(&e.as_bytes()).into_owned(), counted(t))));
            }
            lua_to_reply(&value, &mut reply, 0, script_resp3(&private)).map_err(lua_err)?;
            return Ok(Ok(reply.buf));
        }
        // An error: Redis's message, with where it was raised.
        let Value::Table(t) = value else {
            return Ok(Err((format!("ERR Error running script {name}, execution failure"), false)));
        };
        let already = counted(&t);
        let msg: Option<mlua::String> = t.raw_get("err").ok();
        let mut text = msg.map(|m| String::from_utf8_lossy(&m.as_bytes()).into_owned()).unwrap_or_default();
        let source: Option<String> = t.raw_get("source").ok().flatten();
        let line: Option<i64> = t.raw_get("line").ok().flatten();
        if let (Some(source), Some(line)) = (source, line) {
            text.push_str(&format!(" script: {name}, on {source}:{line}."));
        }
        Ok(Err((text, already)))
    });
    ctx.in_exec = saved_in_exec;
    ctx.in_script = saved_in_script;
    ctx.client.db = saved_db;
    ctx.client.resp3 = saved_resp3;
    ctx.keys.db = saved_db;
    drop(active);
    match result? {
        Ok(bytes) => {
            out.raw(&bytes);
            Ok(())
        }
        Err((text, counted)) => {
            ctx.client.error_counted = counted;
            Err(text.into())
        }
    }
}
