//! The node's scripting state, apart from the commands that use it: the
//! script cache, the function libraries, and the script running now (for
//! BUSY, SCRIPT KILL, FUNCTION STATS). The node holds it (`Node::scripts`);
//! it knows nothing of the node, the command table or Lua.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

/// The script running now (at most one: a script holds every partition).
#[derive(Default)]
pub struct RunState {
    /// Scripts that passed dispatch and are running or taking their locks.
    pub active: AtomicUsize,
    /// Unix ms the running script started (0: none has its locks yet).
    pub started_ms: AtomicU64,
    /// Asked to stop by SCRIPT KILL / FUNCTION KILL.
    pub kill: AtomicBool,
    /// The running script has written: it can no longer be killed.
    pub wrote: AtomicBool,
    /// The running script is a function (FCALL) rather than EVAL.
    pub is_function: AtomicBool,
    /// Bytes the script thread's Lua interpreter holds (after its last run).
    pub vm_memory: AtomicU64,
    /// Name (function name or SHA1) and command of the running script.
    pub what: Mutex<(String, String)>,
}

/// A script's reply bytes, or its error text and whether that error was
/// counted already (`Client::error_counted`).
pub type ScriptResult = Result<Vec<u8>, (String, bool)>;

/// The node's scripting state.
#[derive(Default)]
pub struct Scripts {
    /// Script cache: lower-case hex SHA1 → body.
    pub cache: Mutex<HashMap<String, Arc<[u8]>>>,
    /// Bumped by SCRIPT FLUSH: interpreters drop what they compiled.
    pub cache_gen: AtomicU64,
    /// Function libraries by name.
    pub libraries: Mutex<std::collections::BTreeMap<String, Arc<Library>>>,
    /// Bumped on every library change: interpreters reload them.
    pub lib_gen: AtomicU64,
    pub run: Arc<RunState>,
    /// Replies of scripts run on the script thread, by client id, until
    /// the client's EVAL/FCALL runs again to collect them.
    pub results: Mutex<HashMap<u64, ScriptResult>>,
}

/// What a command must do while a script runs.
pub enum WhileBusy {
    /// Past `busy-reply-threshold`: this error.
    Busy(&'static str),
    /// Not yet: wait (the worker goes on serving others), then run again.
    Wait(crate::store::PendingRead),
}

pub const BUSY_EVAL: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can \
     either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// Scripting's share of memory, as INFO memory reports it.
pub struct ScriptMemory {
    pub vm: u64,
    pub scripts: u64,
    pub scripts_bytes: u64,
    pub functions: u64,
    pub functions_bytes: u64,
}

impl Scripts {
    pub fn memory(&self) -> ScriptMemory {
        let (scripts, scripts_bytes) = {
            let cache = self.cache.lock();
            (cache.len() as u64, cache.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum())
        };
        let (functions, functions_bytes) = {
            let libs = self.libraries.lock();
            (libs.values().map(|l| l.functions.len() as u64).sum(), libs.values().map(|l| l.code.len() as u64).sum())
        };
        ScriptMemory { vm: self.run.vm_memory.load(Relaxed), scripts, scripts_bytes, functions, functions_bytes }
    }

    /// True while a script runs (or is about to): one relaxed load, checked
    /// by dispatch for every command.
    #[inline]
    pub fn active(&self) -> bool {
        self.run.active.load(Relaxed) != 0
    }

    /// True when the client's script finished and its reply waits.
    pub fn has_result(&self, client_id: u64) -> bool {
        self.results.lock().contains_key(&client_id)
    }

    /// For a command arriving while a script runs: BUSY once the script has
    /// run past `threshold_ms`, else a wait until it ends or passes it.
    pub fn while_busy(&self, threshold_ms: u64) -> WhileBusy {
        if let Some(e) = busy_error(&self.run, threshold_ms) {
            return WhileBusy::Busy(e);
        }
        let run = self.run.clone();
        WhileBusy::Wait(Box::pin(async move {
            while run.active.load(Relaxed) != 0 && busy_error(&run, threshold_ms).is_none() {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }))
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL.
    pub(super) fn kill(&self, function: bool) -> Result<(), &'static str> {
        let run = &self.run;
        if !self.active() || run.started_ms.load(SeqCst) == 0 {
            return Err(NOTBUSY);
        }
        let is_fn = run.is_function.load(Relaxed);
        if is_fn && !function {
            return Err(BUSY_FUNCTION);
        }
        if !is_fn && function {
            return Err(BUSY_EVAL);
        }
        if run.wrote.load(SeqCst) {
            return Err(UNKILLABLE);
        }
        run.kill.store(true, SeqCst);
        Ok(())
    }
}

/// The BUSY error when the running script has run past `threshold_ms`.
fn busy_error(run: &RunState, threshold_ms: u64) -> Option<&'static str> {
    let started = run.started_ms.load(SeqCst);
    if run.active.load(Relaxed) == 0 || started == 0 {
        return None;
    }
    if crate::store::now_ms().saturating_sub(started) < threshold_ms {
        return None;
    }
    Some(if run.is_function.load(Relaxed) { BUSY_FUNCTION } else { BUSY_EVAL })
}

/// Flags a script may declare (`#!lua flags=...` or register_function).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ScriptFlags {
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
}

impl ScriptFlags {
    pub fn parse_one(&mut self, f: &str) -> bool {
        match f {
            "no-writes" => self.no_writes = true,
            "allow-oom" => self.allow_oom = true,
            "allow-stale" => self.allow_stale = true,
            "no-cluster" => self.no_cluster = true,
            "allow-cross-slot-keys" => self.allow_cross_slot = true,
            _ => return false,
        }
        true
    }

    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.no_writes {
            v.push("no-writes");
        }
        if self.allow_oom {
            v.push("allow-oom");
        }
        if self.allow_stale {
            v.push("allow-stale");
        }
        if self.no_cluster {
            v.push("no-cluster");
        }
        if self.allow_cross_slot {
            v.push("allow-cross-slot-keys");
        }
        v
    }
}

/// One loaded library.
#[derive(Debug)]
pub struct Library {
    pub name: String,
    /// The whole code, shebang included.
    pub code: Arc<[u8]>,
    pub functions: Vec<FunctionMeta>,
}

#[derive(Debug, Clone)]
pub struct FunctionMeta {
    pub name: String,
    pub description: Option<Vec<u8>>,
    pub flags: ScriptFlags,
}

/// The library and flags of function `name`.
pub fn find_function(scripts: &Scripts, name: &str) -> Option<(String, ScriptFlags)> {
    let libs = scripts.libraries.lock();
    libs.values()
        .find_map(|l| l.functions.iter().find(|f| f.name.eq_ignore_ascii_case(name)).map(|f| (l.name.clone(), f.flags)))
}

/// An EVAL body's shebang (`#!lua flags=a,b`): its flags and the body with
/// the shebang line blanked (line numbers stay those of the script).
pub fn eval_shebang(body: &[u8]) -> Result<Option<ScriptFlags>, crate::commands::CmdError> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|s| !s.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(format!("ERR Unexpected engine in script shebang: #!{engine}").into());
    }
    let mut flags = ScriptFlags::default();
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {p}").into());
        };
        for f in list.split(',').filter(|s| !s.is_empty()) {
            if !flags.parse_one(f) {
                return Err(format!("ERR Unexpected flag in script shebang: {f}").into());
            }
        }
    }
    Ok(Some(flags))
}

impl Scripts {
    /// Whether EVAL, EVALSHA or FCALL with these arguments may write (CLIENT
    /// PAUSE WRITE holds it back): unless its script or function declares
    /// `no-writes`. An unknown script or function may.
    pub fn may_write(&self, name: &str, args: &[&[u8]]) -> bool {
        !self.declared_flags(name, args).is_some_and(|f| f.no_writes)
    }

    /// The flags the script or function of EVAL, EVALSHA or FCALL (and their
    /// `_ro` forms) declares; None for a script without a shebang (Redis's
    /// compatibility mode: only the commands it calls are checked) or an
    /// unknown one.
    pub fn declared_flags(&self, name: &str, args: &[&[u8]]) -> Option<ScriptFlags> {
        let target = args.get(1)?;
        match name {
            "eval" | "eval_ro" => eval_shebang(target).ok().flatten(),
            "evalsha" | "evalsha_ro" => {
                let sha = String::from_utf8_lossy(target).to_ascii_lowercase();
                let body = self.cache.lock().get(&sha).cloned();
                body.and_then(|b| eval_shebang(&b).ok().flatten())
            }
            "fcall" | "fcall_ro" => find_function(self, &String::from_utf8_lossy(target)).map(|(_, f)| f),
            _ => None,
        }
    }
}
