//! FUNCTION LOAD/CALL/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL/HELP: Lua
//! libraries (`#!lua name=...`) whose `redis.register_function` calls
//! declare named functions with flags.
//!
//! FUNCTION DUMP writes Redis's payload layout — one RDB `FUNCTION2`
//! record (opcode 245, the library code as an RDB string) per library, the
//! RDB version (10) and a CRC64 — with the code stored uncompressed, which
//! Redis reads too; RESTORE reads that layout, LZF-compressed strings
//! included, so payloads travel both ways.

use super::engine;
use super::{FunctionMeta, Library, ScriptFlags, Scripts};
use crate::base::{eq_ic, glob_match};
use crate::commands::args::{help, subcommand};
use crate::commands::{CmdError, CmdResult, Ctx};
use crate::protocol::Reply;
use crate::store::dump as rdb;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

pub const FUNCTION_SUBS: &[&str] = &["delete", "dump", "flush", "kill", "list", "load", "restore", "stats", "help"];

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

pub fn function(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("function", FUNCTION_SUBS, args)? {
        "load" => load(ctx, args, out),
        "delete" => {
            let name = String::from_utf8_lossy(args[2]).into_owned();
            let scripts = &ctx.node.scripts;
            if scripts.libraries.lock().remove(&name).is_none() {
                return Err("ERR Library not found".into());
            }
            scripts.lib_gen.fetch_add(1, SeqCst);
            out.ok();
            Ok(())
        }
        "flush" => {
            if args.len() > 3 {
                return Err(syntax_error(args));
            }
            if args.len() == 3 && !eq_ic(args[2], "sync") && !eq_ic(args[2], "async") {
                return Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into());
            }
            let scripts = &ctx.node.scripts;
            scripts.libraries.lock().clear();
            scripts.lib_gen.fetch_add(1, SeqCst);
            out.ok();
            Ok(())
        }
        "kill" => {
            ctx.node.scripts.kill(true)?;
            out.ok();
            Ok(())
        }
        "list" => list(ctx, args, out),
        "stats" => {
            stats(&ctx.node.scripts, out);
            Ok(())
        }
        "dump" => {
            out.bulk(&dump(&ctx.node.scripts));
            Ok(())
        }
        "restore" => restore(ctx, args, out),
        _ => {
            help(out, FUNCTION_HELP);
            Ok(())
        }
    }
}

/// Redis's `addReplySubcommandSyntaxError`.
fn syntax_error(args: &[&[u8]]) -> CmdError {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(args[1])
    )
    .into()
}

const NAME_RULE: &str =
    "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The library name from the `#!lua name=...` line.
fn parse_metadata(code: &[u8]) -> Result<String, CmdError> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    let mut parts = line.split(' ');
    let engine = parts.next().unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found").into());
    }
    let mut name: Option<String> = None;
    for p in parts.filter(|s| !s.is_empty()) {
        match p.strip_prefix("name=") {
            Some(n) => {
                if name.is_some() {
                    return Err("ERR Invalid metadata value, name argument was given multiple times".into());
                }
                name = Some(n.trim_matches('"').to_string());
            }
            None => return Err(format!("ERR Invalid metadata value given: {p}").into()),
        }
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    if !valid_name(&name) {
        return Err(NAME_RULE.into());
    }
    Ok(name)
}

/// Compiles and runs a library on this thread, checks it against the
/// loaded ones, and installs it.
fn install(ctx: &Ctx<'_>, code: &[u8], replace: bool) -> Result<String, CmdError> {
    let name = parse_metadata(code)?;
    let scripts = &ctx.node.scripts;
    if !replace && scripts.libraries.lock().contains_key(&name) {
        return Err(format!("ERR Library '{name}' already exists").into());
    }
    let registered = engine::load_library(ctx, code)?;
    if registered.is_empty() {
        return Err("ERR No functions registered".into());
    }
    let functions: Vec<FunctionMeta> = registered
        .into_iter()
        .map(|(fname, flags, description)| {
            let mut f = ScriptFlags::default();
            for fl in &flags {
                f.parse_one(fl);
            }
            FunctionMeta { name: fname, description, flags: f }
        })
        .collect();
    let mut libs = scripts.libraries.lock();
    if !replace && libs.contains_key(&name) {
        return Err(format!("ERR Library '{name}' already exists").into());
    }
    for f in &functions {
        if libs.values().any(|l| l.name != name && l.functions.iter().any(|g| g.name.eq_ignore_ascii_case(&f.name))) {
            return Err(format!("ERR Function {} already exists", f.name).into());
        }
    }
    libs.insert(name.clone(), Arc::new(Library { name: name.clone(), code: Arc::from(code), functions }));
    drop(libs);
    scripts.lib_gen.fetch_add(1, SeqCst);
    Ok(name)
}

fn load(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if eq_ic(args[i], "replace") {
            replace = true;
        } else {
            return Err(format!("ERR Unknown option given: {}", String::from_utf8_lossy(args[i])).into());
        }
        i += 1;
    }
    if i != args.len() - 1 {
        return Err("ERR Function code was not given".into());
    }
    let name = install(ctx, args[i], replace)?;
    out.bulk(name.as_bytes());
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        if eq_ic(args[i], "withcode") {
            if with_code {
                return Err("ERR Unknown argument withcode".into());
            }
            with_code = true;
        } else if eq_ic(args[i], "libraryname") {
            if pattern.is_some() {
                return Err("ERR Unknown argument libraryname".into());
            }
            if i + 1 >= args.len() {
                return Err("ERR library name argument was not given".into());
            }
            pattern = Some(args[i + 1]);
            i += 1;
        } else {
            return Err(format!("ERR Unknown argument {}", String::from_utf8_lossy(args[i])).into());
        }
        i += 1;
    }
    let libs: Vec<Arc<Library>> = ctx
        .node
        .scripts
        .libraries
        .lock()
        .values()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes(), false)))
        .cloned()
        .collect();
    out.array(libs.len());
    for l in &libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(l.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(l.functions.len());
        for f in &l.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = f.flags.names();
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&l.code);
        }
    }
    Ok(())
}

fn stats(scripts: &Scripts, out: &mut Reply) {
    out.map(2);
    out.bulk(b"running_script");
    let run = &scripts.run;
    let started = run.started_ms.load(SeqCst);
    if scripts.active() && started != 0 && run.is_function.load(SeqCst) {
        let what = run.what.lock().clone();
        out.map(3);
        out.bulk(b"name");
        out.bulk(what.0.as_bytes());
        out.bulk(b"command");
        let parts: Vec<&str> = what.1.split('\u{0}').collect();
        out.array(parts.len());
        for p in parts {
            out.bulk(p.as_bytes());
        }
        out.bulk(b"duration_ms");
        out.int(crate::store::now_ms().saturating_sub(started) as i64);
    } else {
        out.null();
    }
    out.bulk(b"engines");
    let libs = scripts.libraries.lock();
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libs.len() as i64);
    out.bulk(b"functions_count");
    out.int(libs.values().map(|l| l.functions.len() as i64).sum());
}

const RDB_OPCODE_FUNCTION2: u8 = 245;
const RDB_VERSION: u16 = 10;

/// FUNCTION DUMP: each library's code after the FUNCTION2 opcode, in
/// the RDB encoding and trailer of DUMP payloads (`store::dump`).
fn dump(scripts: &Scripts) -> Vec<u8> {
    let mut out = Vec::new();
    for l in scripts.libraries.lock().values() {
        out.push(RDB_OPCODE_FUNCTION2);
        rdb::put_len(&mut out, l.code.len() as u64);
        out.extend_from_slice(&l.code);
    }
    rdb::seal(&mut out);
    out
}

const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";

fn restore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let payload = args[2];
    let mut policy = "append";
    if args.len() > 4 {
        return Err(syntax_error(args));
    }
    if args.len() == 4 {
        policy = match () {
            _ if eq_ic(args[3], "flush") => "flush",
            _ if eq_ic(args[3], "append") => "append",
            _ if eq_ic(args[3], "replace") => "replace",
            _ => return Err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.".into()),
        };
    }
    if payload.len() < 10 {
        return Err(BAD_PAYLOAD.into());
    }
    let body_end = payload.len() - 10;
    let version = u16::from_le_bytes([payload[body_end], payload[body_end + 1]]);
    let crc = u64::from_le_bytes(payload[body_end + 2..].try_into().expect("8 bytes"));
    if version > RDB_VERSION || (crc != 0 && rdb::crc64(0, &payload[..body_end + 2]) != crc) {
        return Err(BAD_PAYLOAD.into());
    }
    let mut data = rdb::Reader::new(&payload[..body_end]);
    let mut codes = Vec::new();
    while !data.at_end() {
        if data.byte() != Ok(RDB_OPCODE_FUNCTION2) {
            return Err("ERR given type is not a function".into());
        }
        let Ok(code) = data.string() else {
            return Err("ERR Failed loading library payload".into());
        };
        codes.push(code);
    }
    // Check every library first (names and collisions), then install.
    let scripts = &ctx.node.scripts;
    let mut names = Vec::new();
    for code in &codes {
        let name = parse_metadata(code)?;
        if policy == "append" && scripts.libraries.lock().contains_key(&name) {
            return Err(format!("ERR Library {name} already exists").into());
        }
        engine::load_library(ctx, code)?;
        names.push(name);
    }
    let saved: Vec<(String, Arc<Library>)> =
        scripts.libraries.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if policy == "flush" {
        scripts.libraries.lock().clear();
    }
    for code in &codes {
        if let Err(e) = install(ctx, code, policy != "append") {
            let mut libs = scripts.libraries.lock();
            libs.clear();
            libs.extend(saved);
            drop(libs);
            scripts.lib_gen.fetch_add(1, SeqCst);
            return Err(e);
        }
    }
    scripts.lib_gen.fetch_add(1, SeqCst);
    out.ok();
    Ok(())
}
