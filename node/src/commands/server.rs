//! Server commands: COMMAND, CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB,
//! TIME, LASTSAVE, DEBUG, MEMORY, ROLE, SHUTDOWN.
//!
//! Also the metadata of container subcommands (CLIENT LIST, CONFIG GET, ...):
//! their arity checks and unknown-subcommand errors, and how COMMAND reports
//! them, follow Redis 7.0.

use super::connection::{REDIS_VERSION, help};
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::{POLICIES, parse_memory};
use crate::protocol::Reply;
use crate::server::Shared;
use crate::store::{Keyspace, NUM_DBS, Partition, Value, clear_db, hash_bytes};
use crate::util::{eq_ic, glob_match};
use smallvec::SmallVec;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{SystemTime, UNIX_EPOCH};

const LS: u32 = flags::LOADING | flags::STALE;
const NLS: u32 = flags::NOSCRIPT | LS;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("command", -1, LS, Keys::None, command).acl("@slow @connection").subs(COMMAND_SUBS),
    CommandDef::new("config", -2, 0, Keys::None, config).acl("@slow").subs(CONFIG_SUBS),
    CommandDef::new("info", -1, LS, Keys::All, info).acl("@slow @dangerous"),
    CommandDef::new("dbsize", 1, flags::READONLY | flags::FAST, Keys::All, dbsize).acl("@keyspace @read @fast"),
    CommandDef::new("flushdb", -1, flags::WRITE, Keys::All, flushdb).acl("@keyspace @write @slow @dangerous"),
    CommandDef::new("flushall", -1, flags::WRITE, Keys::All, flushall).acl("@keyspace @write @slow @dangerous"),
    CommandDef::new("swapdb", 3, flags::WRITE | flags::FAST, Keys::All, swapdb)
        .acl("@keyspace @write @fast @dangerous"),
    CommandDef::new("time", 1, LS | flags::FAST, Keys::None, time).acl("@fast"),
    CommandDef::new("lastsave", 1, LS | flags::FAST, Keys::None, lastsave).acl("@admin @fast @dangerous"),
    CommandDef::new("debug", -2, flags::ADMIN | NLS, Keys::Custom(debug_keys), debug).acl("@admin @slow @dangerous"),
    CommandDef::new("memory", -2, 0, Keys::All, memory).acl("@slow").subs(MEMORY_SUBS),
    CommandDef::new("role", 1, NLS | flags::FAST, Keys::None, role).acl("@admin @fast @dangerous"),
    CommandDef::new("shutdown", -1, flags::ADMIN | NLS | flags::NO_MULTI | flags::ALLOW_BUSY, Keys::None, shutdown)
        .acl("@admin @slow @dangerous"),
];

// ---------------------------------------------------------------------------
// Subcommands
// ---------------------------------------------------------------------------

/// Redis's metadata for one subcommand of a container command.
pub struct SubDef {
    /// `container|sub`, lower case.
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    /// Legacy (first, last, step) key range.
    pub range: (i32, i32, i32),
    pub acl: &'static str,
}

const fn sub(name: &'static str, arity: i32, flags: u32, acl: &'static str) -> SubDef {
    SubDef { name, arity, flags, range: (0, 0, 0), acl }
}

const fn keyed_sub(name: &'static str, arity: i32, flags: u32, acl: &'static str) -> SubDef {
    SubDef { name, arity, flags, range: (2, 2, 1), acl }
}

const ADMIN_NLS: u32 = flags::ADMIN | NLS;

/// Subcommands of every container Strata has, as Redis 7.0 describes them
/// (NO-TOUCH and SETINFO as Redis 7.2 does).
pub static SUBCOMMANDS: &[SubDef] = &[
    sub("client|getname", 2, NLS, "@slow @connection"),
    sub("client|getredir", 2, NLS, "@slow @connection"),
    sub("client|help", 2, LS, "@slow @connection"),
    sub("client|id", 2, NLS, "@slow @connection"),
    sub("client|info", 2, NLS, "@slow @connection"),
    sub("client|kill", -3, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|list", -2, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|no-evict", 3, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|no-touch", 3, NLS, "@slow @connection"),
    sub("client|reply", 3, NLS, "@slow @connection"),
    sub("client|setinfo", 4, NLS, "@slow @connection"),
    sub("client|setname", 3, NLS, "@slow @connection"),
    sub("client|trackinginfo", 2, NLS, "@slow @connection"),
    sub("command|count", 2, LS, "@slow @connection"),
    sub("command|docs", -2, LS, "@slow @connection"),
    sub("command|getkeys", -4, LS, "@slow @connection"),
    sub("command|help", 2, LS, "@slow @connection"),
    sub("command|info", -2, LS, "@slow @connection"),
    sub("command|list", -2, LS, "@slow @connection"),
    sub("config|get", -3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("config|help", 2, LS, "@slow"),
    sub("config|resetstat", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("config|rewrite", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("config|set", -4, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("memory|doctor", 2, 0, "@slow"),
    sub("memory|help", 2, LS, "@slow"),
    sub("memory|malloc-stats", 2, 0, "@slow"),
    sub("memory|purge", 2, 0, "@slow"),
    sub("memory|stats", 2, 0, "@slow"),
    keyed_sub("memory|usage", -3, flags::READONLY, "@read @slow"),
    keyed_sub("object|encoding", 3, flags::READONLY, "@keyspace @read @slow"),
    keyed_sub("object|freq", 3, flags::READONLY, "@keyspace @read @slow"),
    sub("object|help", 2, LS, "@keyspace @slow"),
    keyed_sub("object|idletime", 3, flags::READONLY, "@keyspace @read @slow"),
    keyed_sub("object|refcount", 3, flags::READONLY, "@keyspace @read @slow"),
    sub("pubsub|channels", -2, flags::PUBSUB | LS, "@pubsub @slow"),
    sub("pubsub|help", 2, LS, "@slow"),
    sub("pubsub|numpat", 2, flags::PUBSUB | LS, "@pubsub @slow"),
    sub("pubsub|numsub", -2, flags::PUBSUB | LS, "@pubsub @slow"),
    sub("pubsub|shardchannels", -2, flags::PUBSUB | LS, "@pubsub @slow"),
    sub("pubsub|shardnumsub", -2, flags::PUBSUB | LS, "@pubsub @slow"),
];

pub fn sub_def(full_name: &str) -> Option<&'static SubDef> {
    SUBCOMMANDS.iter().find(|s| s.name == full_name)
}

/// An argument for an error message (Redis quotes at most 128 bytes).
pub fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned()
}

/// Resolves `args[1]` among a container's `supported` subcommands and checks
/// its arity, with Redis's errors; returns the lower-case subcommand name.
pub fn subcommand(container: &str, supported: &[&'static str], args: &[&[u8]]) -> Result<&'static str, CmdError> {
    let given = args[1];
    let Some(&name) = supported.iter().find(|s| eq_ic(given, s)) else {
        return Err(
            format!("ERR unknown subcommand '{}'. Try {} HELP.", lossy(given), container.to_ascii_uppercase()).into()
        );
    };
    let full = format!("{container}|{name}");
    if let Some(def) = sub_def(&full)
        && !super::dispatch::arity_ok(def.arity, args.len())
    {
        return Err(err::arity(&full).into());
    }
    Ok(name)
}

// ---------------------------------------------------------------------------
// COMMAND
// ---------------------------------------------------------------------------

const COMMAND_SUBS: &[&str] = &["count", "docs", "getkeys", "help", "info", "list"];

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

/// ACL categories in the order Redis lists them.
const ACL_CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Legacy key ranges Redis reports for commands whose keys are computed.
const MOVABLE_RANGES: &[(&str, (i32, i32, i32))] = &[
    ("sort", (1, 1, 1)),
    ("sort_ro", (1, 1, 1)),
    ("zunionstore", (1, 1, 1)),
    ("zinterstore", (1, 1, 1)),
    ("zdiffstore", (1, 1, 1)),
    ("georadius", (1, 1, 1)),
    ("georadiusbymember", (1, 1, 1)),
    ("migrate", (3, 3, 1)),
];

/// One command or subcommand as COMMAND INFO / DOCS present it.
struct CmdView {
    name: String,
    arity: i32,
    flags: u32,
    movable: bool,
    range: (i32, i32, i32),
    acl: &'static str,
    subs: Vec<CmdView>,
}

impl CmdView {
    fn of(def: &CommandDef) -> CmdView {
        let mut view = CmdView {
            name: def.name.into(),
            arity: def.arity,
            flags: def.flags,
            movable: false,
            range: (0, 0, 0),
            acl: def.acl,
            subs: vec![],
        };
        if !def.subcommands.is_empty() {
            // Pure containers carry no flags or categories of their own; COMMAND,
            // which also runs without a subcommand, keeps its own. None has keys.
            if def.arity != -1 {
                view.flags = 0;
                view.acl = "";
            }
            view.subs = def.subcommands.iter().map(|s| CmdView::of_sub(def.name, s)).collect();
            return view;
        }
        match def.keys {
            Keys::None | Keys::All => {}
            Keys::Range(f, l, s) => view.range = (f, l, s),
            // DEBUG locks the key of DEBUG OBJECT, but Redis does not call it movable.
            Keys::Custom(_) if def.name == "debug" => {}
            Keys::Custom(_) => {
                view.movable = true;
                view.range = MOVABLE_RANGES.iter().find(|(n, _)| *n == def.name).map_or((0, 0, 0), |(_, r)| *r);
            }
        }
        view
    }

    fn of_sub(container: &str, sub: &str) -> CmdView {
        let name = if sub.contains('|') { sub.to_string() } else { format!("{container}|{sub}") };
        let (arity, flags, range, acl) = match sub_def(&name) {
            Some(d) => (d.arity, d.flags, d.range, d.acl),
            None => (-2, 0, (0, 0, 0), ""),
        };
        CmdView { name, arity, flags, movable: false, range, acl, subs: vec![] }
    }

    /// Flag names in Redis's order.
    fn flag_names(&self) -> SmallVec<[&'static str; 8]> {
        let f = self.flags;
        let mut v = SmallVec::new();
        for (bit, name) in [
            (flags::WRITE, "write"),
            (flags::READONLY, "readonly"),
            (flags::DENYOOM, "denyoom"),
            (flags::ADMIN, "admin"),
            (flags::PUBSUB, "pubsub"),
            (flags::NOSCRIPT, "noscript"),
            (flags::BLOCKING, "blocking"),
            (flags::LOADING, "loading"),
            (flags::STALE, "stale"),
        ] {
            if f & bit != 0 {
                v.push(name);
            }
        }
        if self.name == "exec" {
            v.push("skip_slowlog");
        }
        // WATCH refuses MULTI through this flag, but Redis does not list it.
        let no_multi = f & flags::NO_MULTI != 0 && self.name != "watch";
        for (on, name) in [(f & flags::FAST != 0, "fast"), (f & flags::NO_AUTH != 0, "no_auth"), (no_multi, "no_multi")]
        {
            if on {
                v.push(name);
            }
        }
        if self.movable {
            v.push("movablekeys");
        }
        if f & flags::ALLOW_BUSY != 0 {
            v.push("allow_busy");
        }
        v
    }

    /// Declared categories plus those Redis implies from the flags.
    fn categories(&self) -> SmallVec<[&'static str; 8]> {
        let bit = |name: &str| 1u32 << ACL_CATEGORIES.iter().position(|c| *c == name).expect("known category");
        let mut set = 0u32;
        for word in self.acl.split_whitespace() {
            let word = word.trim_start_matches('@');
            if let Some(i) = ACL_CATEGORIES.iter().position(|c| c.eq_ignore_ascii_case(word)) {
                set |= 1 << i;
            }
        }
        let f = self.flags;
        for (flag, cat) in [
            (flags::WRITE, "write"),
            (flags::ADMIN, "admin"),
            (flags::ADMIN, "dangerous"),
            (flags::PUBSUB, "pubsub"),
            (flags::FAST, "fast"),
            (flags::BLOCKING, "blocking"),
        ] {
            if f & flag != 0 {
                set |= bit(cat);
            }
        }
        if f & flags::READONLY != 0 && set & bit("scripting") == 0 {
            set |= bit("read");
        }
        if set & bit("fast") == 0 {
            set |= bit("slow");
        }
        ACL_CATEGORIES.iter().enumerate().filter(|(i, _)| set & (1 << i) != 0).map(|(_, c)| *c).collect()
    }

    fn has_category(&self, cat: &str) -> bool {
        self.categories().iter().any(|c| c.eq_ignore_ascii_case(cat))
    }

    fn write_info(&self, out: &mut Reply) {
        out.array(10);
        out.bulk(self.name.as_bytes());
        out.int(self.arity as i64);
        let names = self.flag_names();
        out.set(names.len());
        for n in &names {
            out.simple(n);
        }
        out.int(self.range.0 as i64);
        out.int(self.range.1 as i64);
        out.int(self.range.2 as i64);
        let cats = self.categories();
        out.set(cats.len());
        for c in &cats {
            out.simple(&format!("@{c}"));
        }
        // Tips and key specs are not modelled.
        out.set(0);
        out.set(0);
        // Redis: an empty set without subcommands, else an array.
        if self.subs.is_empty() {
            out.set(0);
        } else {
            out.array(self.subs.len());
            for s in &self.subs {
                s.write_info(out);
            }
        }
    }

    fn write_docs(&self, out: &mut Reply, container_group: Option<&'static str>) {
        let doc = DOCS.iter().find(|d| d.0 == self.name);
        let group = doc.map(|d| d.3).or(container_group).unwrap_or_else(|| self.derived_group());
        let fields = if doc.is_some() { 4 } else { 1 } + usize::from(!self.subs.is_empty());
        out.map(fields);
        if let Some(&(_, summary, since, _, _)) = doc {
            out.bulk(b"summary");
            out.bulk(summary.as_bytes());
            out.bulk(b"since");
            out.bulk(since.as_bytes());
        }
        out.bulk(b"group");
        out.bulk(group.as_bytes());
        if let Some(&(_, _, _, _, complexity)) = doc {
            out.bulk(b"complexity");
            out.bulk(complexity.as_bytes());
        }
        if !self.subs.is_empty() {
            out.bulk(b"subcommands");
            out.map(self.subs.len());
            for s in &self.subs {
                out.bulk(s.name.as_bytes());
                s.write_docs(out, Some(group));
            }
        }
    }

    /// The COMMAND DOCS group, from the command's categories.
    fn derived_group(&self) -> &'static str {
        let cats = self.categories();
        for (cat, group) in [
            ("bitmap", "bitmap"),
            ("string", "string"),
            ("list", "list"),
            ("hash", "hash"),
            ("sortedset", "sorted-set"),
            ("set", "set"),
            ("hyperloglog", "hyperloglog"),
            ("geo", "geo"),
            ("stream", "stream"),
            ("pubsub", "pubsub"),
            ("transaction", "transactions"),
            ("scripting", "scripting"),
            ("connection", "connection"),
            ("keyspace", "generic"),
        ] {
            if cats.contains(&cat) {
                return group;
            }
        }
        "server"
    }
}

/// Documentation of this family's commands: (name, summary, since, group, complexity).
#[rustfmt::skip]
const DOCS: &[(&str, &str, &str, &str, &str)] = &[
    ("ping", "Ping the server", "1.0.0", "connection", "O(1)"),
    ("echo", "Echo the given string", "1.0.0", "connection", "O(1)"),
    ("hello", "Handshake with Redis", "6.0.0", "connection", "O(1)"),
    ("auth", "Authenticate to the server", "1.0.0", "connection", "O(N) where N is the number of passwords defined for the user"),
    ("select", "Change the selected database for the current connection", "1.0.0", "connection", "O(1)"),
    ("quit", "Close the connection", "1.0.0", "connection", "O(1)"),
    ("reset", "Reset the connection", "6.2.0", "connection", "O(1)"),
    ("client", "A container for client connection commands", "2.4.0", "connection", "Depends on subcommand."),
    ("client|getname", "Get the current connection name", "2.6.9", "connection", "O(1)"),
    ("client|getredir", "Get tracking notifications redirection client ID if any", "6.0.0", "connection", "O(1)"),
    ("client|help", "Show helpful text about the different subcommands", "5.0.0", "connection", "O(1)"),
    ("client|id", "Returns the client ID for the current connection", "5.0.0", "connection", "O(1)"),
    ("client|info", "Returns information about the current client connection.", "6.2.0", "connection", "O(1)"),
    ("client|kill", "Kill the connection of a client", "2.4.0", "connection", "O(N) where N is the number of client connections"),
    ("client|list", "Get the list of client connections", "2.4.0", "connection", "O(N) where N is the number of client connections"),
    ("client|no-evict", "Set client eviction mode for the current connection", "7.0.0", "connection", "O(1)"),
    ("client|no-touch", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys", "7.2.0", "connection", "O(1)"),
    ("client|reply", "Instruct the server whether to reply to commands", "3.2.0", "connection", "O(1)"),
    ("client|setinfo", "Set client or connection specific info", "7.2.0", "connection", "O(1)"),
    ("client|setname", "Set the current connection name", "2.6.9", "connection", "O(1)"),
    ("client|trackinginfo", "Return information about server assisted client side caching for the current connection", "6.2.0", "connection", "O(1)"),
    ("command", "Get array of Redis command details", "2.8.13", "server", "O(N) where N is the total number of Redis commands"),
    ("command|count", "Get total number of Redis commands", "2.8.13", "server", "O(1)"),
    ("command|docs", "Get array of specific Redis command documentation", "7.0.0", "server", "O(N) where N is the number of commands to look up"),
    ("command|getkeys", "Extract keys given a full Redis command", "2.8.13", "server", "O(N) where N is the number of arguments to the command"),
    ("command|help", "Show helpful text about the different subcommands", "5.0.0", "server", "O(1)"),
    ("command|info", "Get array of specific Redis command details, or all when no argument is given.", "2.8.13", "server", "O(N) where N is the number of commands to look up"),
    ("command|list", "Get an array of Redis command names", "7.0.0", "server", "O(N) where N is the total number of Redis commands"),
    ("config", "A container for server configuration commands", "2.0.0", "server", "Depends on subcommand."),
    ("config|get", "Get the values of configuration parameters", "2.0.0", "server", "O(N) when N is the number of configuration parameters provided"),
    ("config|help", "Show helpful text about the different subcommands", "5.0.0", "server", "O(1)"),
    ("config|resetstat", "Reset the stats returned by INFO", "2.0.0", "server", "O(1)"),
    ("config|rewrite", "Rewrite the configuration file with the in memory configuration", "2.8.0", "server", "O(1)"),
    ("config|set", "Set configuration parameters to the given values", "2.0.0", "server", "O(N) when N is the number of configuration parameters provided"),
    ("info", "Get information and statistics about the server", "1.0.0", "server", "O(1)"),
    ("dbsize", "Return the number of keys in the selected database", "1.0.0", "server", "O(1)"),
    ("flushdb", "Remove all keys from the current database", "1.0.0", "server", "O(N) where N is the number of keys in the selected database"),
    ("flushall", "Remove all keys from all databases", "1.0.0", "server", "O(N) where N is the total number of keys in all databases"),
    ("swapdb", "Swaps two Redis databases", "4.0.0", "server", "O(N) where N is the count of clients watching or blocking on keys from both databases."),
    ("time", "Return the current server time", "2.6.0", "server", "O(1)"),
    ("lastsave", "Get the UNIX time stamp of the last successful save to disk", "1.0.0", "server", "O(1)"),
    ("debug", "A container for debugging commands", "1.0.0", "server", "Depends on subcommand."),
    ("memory", "A container for memory diagnostics commands", "4.0.0", "server", "Depends on subcommand."),
    ("memory|doctor", "Outputs memory problems report", "4.0.0", "server", "O(1)"),
    ("memory|help", "Show helpful text about the different subcommands", "4.0.0", "server", "O(1)"),
    ("memory|malloc-stats", "Show allocator internal stats", "4.0.0", "server", "Depends on how much memory is allocated, could be slow"),
    ("memory|purge", "Ask the allocator to release memory", "4.0.0", "server", "Depends on how much memory is allocated, could be slow"),
    ("memory|stats", "Show memory usage details", "4.0.0", "server", "O(1)"),
    ("memory|usage", "Estimate the memory usage of a key", "4.0.0", "server", "O(N) where N is the number of samples."),
    ("role", "Return the role of the instance in the context of replication", "2.8.12", "server", "O(1)"),
    ("shutdown", "Synchronously save the dataset to disk and then shut down the server", "1.0.0", "server", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)"),
];

/// Looks up a command by name, or a subcommand by `container|sub`.
fn find_view(shared: &Shared, name: &[u8]) -> Option<CmdView> {
    if let Some(idx) = shared.table.lookup(name) {
        return Some(CmdView::of(shared.table.get(idx)));
    }
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    let (container, sub) = name.split_once('|')?;
    let def = shared.table.get(shared.table.lookup(container.as_bytes())?);
    def.subcommands.contains(&sub).then(|| CmdView::of_sub(def.name, sub))
}

fn write_all_info(shared: &Shared, out: &mut Reply) {
    out.array(shared.table.len());
    for (_, def) in shared.table.iter() {
        CmdView::of(def).write_info(out);
    }
}

fn command(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let shared = ctx.shared;
    if args.len() == 1 {
        write_all_info(shared, out);
        return Ok(());
    }
    match subcommand("command", COMMAND_SUBS, args)? {
        "count" => out.int(shared.table.len() as i64),
        "info" if args.len() == 2 => write_all_info(shared, out),
        "info" => {
            out.array(args.len() - 2);
            for name in &args[2..] {
                match find_view(shared, name) {
                    Some(v) => v.write_info(out),
                    None => out.null(),
                }
            }
        }
        "docs" => {
            let views: Vec<CmdView> = if args.len() == 2 {
                shared.table.iter().map(|(_, d)| CmdView::of(d)).collect()
            } else {
                args[2..].iter().filter_map(|n| find_view(shared, n)).collect()
            };
            out.map(views.len());
            for v in &views {
                out.bulk(v.name.as_bytes());
                v.write_docs(out, None);
            }
        }
        "list" => command_list(shared, args, out)?,
        "getkeys" => command_getkeys(shared, &args[2..], out)?,
        _ => help(out, COMMAND_HELP),
    }
    Ok(())
}

fn command_list(shared: &Shared, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    enum Filter<'a> {
        All,
        Module,
        AclCat(&'a [u8]),
        Pattern(&'a [u8]),
    }
    let filter = match args.len() {
        2 => Filter::All,
        5 if eq_ic(args[2], "filterby") => {
            if eq_ic(args[3], "module") {
                Filter::Module
            } else if eq_ic(args[3], "aclcat") {
                Filter::AclCat(args[4])
            } else if eq_ic(args[3], "pattern") {
                Filter::Pattern(args[4])
            } else {
                return Err(err::SYNTAX.into());
            }
        }
        _ => return Err(err::SYNTAX.into()),
    };
    let mut names = Vec::new();
    for (_, def) in shared.table.iter() {
        let view = CmdView::of(def);
        for v in std::iter::once(&view).chain(view.subs.iter()) {
            let keep = match filter {
                Filter::All => true,
                // There are no modules.
                Filter::Module => false,
                Filter::AclCat(cat) => std::str::from_utf8(cat).is_ok_and(|c| v.has_category(c)),
                Filter::Pattern(p) => glob_match(p, v.name.as_bytes(), true),
            };
            if keep {
                names.push(v.name.clone());
            }
        }
    }
    out.array(names.len());
    for n in &names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

/// COMMAND GETKEYS: the keys a full command line refers to.
fn command_getkeys(shared: &Shared, cmd: &[&[u8]], out: &mut Reply) -> CmdResult {
    const INVALID: &str = "ERR Invalid command specified";
    let def = shared.table.get(shared.table.lookup(cmd[0]).ok_or(CmdError::from(INVALID))?);
    // Containers: the subcommand decides (MEMORY USAGE has a key, MEMORY STATS none).
    let (arity, keys) = if def.subcommands.is_empty() {
        (def.arity, def.keys)
    } else {
        let sub =
            cmd.get(1).and_then(|s| def.subcommands.iter().find(|n| eq_ic(s, n))).ok_or(CmdError::from(INVALID))?;
        let view = CmdView::of_sub(def.name, sub);
        let (first, last, step) = view.range;
        (view.arity, if first > 0 { Keys::Range(first, last, step) } else { Keys::None })
    };
    if !matches!(keys, Keys::Range(..) | Keys::Custom(_)) {
        return Err("ERR The command has no key arguments".into());
    }
    if !super::dispatch::arity_ok(arity, cmd.len()) {
        return Err("ERR Invalid number of arguments specified for command".into());
    }
    let positions = CommandDef::new(def.name, arity, def.flags, keys, def.handler).key_positions(cmd);
    if positions.is_empty() {
        return Err("ERR Invalid arguments specified for command".into());
    }
    out.array(positions.len());
    for &i in &positions {
        out.bulk(cmd[i]);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// CONFIG
// ---------------------------------------------------------------------------

const CONFIG_SUBS: &[&str] = &["get", "set", "resetstat", "rewrite", "help"];

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// A validated CONFIG SET value, applied once every pair has validated.
type Change = Box<dyn FnOnce(&Shared)>;

/// Parses and validates a new value, or says why it is invalid.
type Setter = fn(&[u8]) -> Result<Change, String>;

/// A configuration parameter: how to read it and, unless fixed at start-up,
/// how to change it.
struct Param {
    name: &'static str,
    get: fn(&Shared) -> String,
    set: Option<Setter>,
}

const MB: u64 = 1024 * 1024;
const INT_MAX: i64 = i32::MAX as i64;

#[rustfmt::skip]
static PARAMS: &[Param] = &[
    Param { name: "maxmemory", get: |s| s.maxmemory().to_string(), set: Some(set_maxmemory) },
    Param { name: "maxmemory-policy", get: |s| s.config.runtime.policy_name().into(), set: Some(set_policy) },
    Param { name: "maxmemory-samples", get: |s| s.config.runtime.maxmemory_samples.load(Relaxed).to_string(), set: Some(set_samples) },
    Param { name: "maxclients", get: |s| s.config.runtime.maxclients.load(Relaxed).to_string(), set: Some(set_maxclients) },
    Param { name: "timeout", get: |s| s.config.runtime.timeout.load(Relaxed).to_string(), set: Some(set_timeout) },
    Param { name: "tcp-keepalive", get: |s| s.config.runtime.tcp_keepalive.load(Relaxed).to_string(), set: Some(set_keepalive) },
    Param { name: "requirepass", get: get_requirepass, set: Some(set_requirepass) },
    Param { name: "proto-max-bulk-len", get: |s| s.config.runtime.proto_max_bulk_len.load(Relaxed).to_string(), set: Some(set_proto_max_bulk_len) },
    Param { name: "client-query-buffer-limit", get: |s| s.config.runtime.client_query_buffer_limit.load(Relaxed).to_string(), set: Some(set_query_buffer_limit) },
    Param { name: "client-output-buffer-limit", get: get_obuf_limits, set: Some(set_obuf_limits) },
    Param { name: "loglevel", get: |s| s.config.runtime.loglevel.read().clone(), set: Some(set_loglevel) },
    Param { name: "lfu-log-factor", get: |s| s.ks.lfu_log_factor().to_string(), set: Some(set_lfu_log_factor) },
    Param { name: "adaptive-threads", get: |s| yes_no(s.balance.adaptive()).into(), set: Some(set_adaptive_threads) },
    Param { name: "lfu-decay-time", get: |s| s.ks.lfu_decay_minutes().to_string(), set: Some(set_lfu_decay_time) },
    // No RDB, AOF or keyspace notifications: only their "off" values are accepted.
    Param { name: "save", get: |_| String::new(), set: Some(set_save) },
    Param { name: "appendonly", get: |_| "no".into(), set: Some(set_appendonly) },
    Param { name: "notify-keyspace-events", get: |_| String::new(), set: Some(set_notify_keyspace_events) },
    // Fixed at start-up.
    Param { name: "port", get: |s| s.config.startup.port.to_string(), set: None },
    Param { name: "bind", get: |s| s.config.startup.binds.join(" "), set: None },
    Param { name: "unixsocket", get: |s| s.config.startup.unixsocket.as_ref().map(|p| p.display().to_string()).unwrap_or_default(), set: None },
    Param { name: "unixsocketperm", get: |s| s.config.startup.unixsocketperm.map_or_else(|| "0".into(), |p| format!("{p:o}")), set: None },
    Param { name: "dir", get: |s| absolute(&s.config.startup.dir), set: None },
    Param { name: "databases", get: |_| NUM_DBS.to_string(), set: None },
    Param { name: "threads", get: |s| s.config.startup.threads.to_string(), set: None },
    Param { name: "io-threads", get: |s| s.config.startup.threads.to_string(), set: None },
    Param { name: "partitions", get: |s| s.ks.num_partitions().to_string(), set: None },
    Param { name: "metrics-port", get: |s| s.config.startup.metrics_port.to_string(), set: None },
    Param { name: "durability", get: |s| s.config.startup.durability.into(), set: None },
    Param { name: "fsync-interval", get: |s| format_interval_us(s.config.startup.fsync_interval_us), set: None },
    Param { name: "hz", get: |_| "10".into(), set: None },
    Param { name: "cluster-enabled", get: |_| "no".into(), set: None },
    Param { name: "daemonize", get: |_| "no".into(), set: None },
];

/// `10000` µs → `10ms`: the largest unit that divides the interval exactly.
fn format_interval_us(us: u64) -> String {
    if us % 1_000_000 == 0 {
        format!("{}s", us / 1_000_000)
    } else if us % 1_000 == 0 {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

fn absolute(p: &std::path::Path) -> String {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()
}

fn get_requirepass(s: &Shared) -> String {
    s.config.runtime.password().map(|p| String::from_utf8_lossy(&p).into_owned()).unwrap_or_default()
}

fn get_obuf_limits(s: &Shared) -> String {
    // Only hard limits exist; there are no soft limits and no replicas.
    let rt = &s.config.runtime;
    format!(
        "normal {} 0 0 slave 0 0 0 pubsub {} 0 0",
        rt.obuf_limit_normal.load(Relaxed),
        rt.obuf_limit_pubsub.load(Relaxed)
    )
}

fn text(v: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(v).map_err(|_| "argument must be a valid string".to_string())
}

fn memory_value(v: &[u8], min: u64, max: u64) -> Result<u64, String> {
    let n = parse_memory(text(v)?).ok_or("argument must be a memory value")?;
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n)
}

fn int_value(v: &[u8], min: i64, max: i64) -> Result<i64, String> {
    let n = crate::util::parse_i64(v).ok_or("argument couldn't be parsed into an integer")?;
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n)
}

fn enum_value(v: &[u8], options: &[&'static str]) -> Result<&'static str, String> {
    options
        .iter()
        .find(|o| eq_ic(v, o))
        .copied()
        .ok_or_else(|| format!("argument(s) must be one of the following: {}", options.join(", ")))
}

fn set_maxmemory(v: &[u8]) -> Result<Change, String> {
    let n = memory_value(v, 0, u64::MAX)?;
    Ok(Box::new(move |s| s.config.runtime.maxmemory.store(n, Relaxed)))
}

fn set_policy(v: &[u8]) -> Result<Change, String> {
    // Redis's order (its error lists them so), then Strata's own.
    const ORDER: &[&str] = &[
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
        "sieve",
    ];
    let name = enum_value(v, ORDER)?;
    let idx = POLICIES.iter().position(|p| *p == name).ok_or("unknown policy")? as u8;
    Ok(Box::new(move |s| s.config.runtime.policy.store(idx, Relaxed)))
}

fn set_samples(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 1, INT_MAX)? as usize;
    Ok(Box::new(move |s| s.config.runtime.maxmemory_samples.store(n, Relaxed)))
}

fn set_maxclients(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 1, u32::MAX as i64)? as usize;
    Ok(Box::new(move |s| s.config.runtime.maxclients.store(n, Relaxed)))
}

fn set_timeout(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u64;
    Ok(Box::new(move |s| s.config.runtime.timeout.store(n, Relaxed)))
}

fn set_keepalive(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u64;
    Ok(Box::new(move |s| s.config.runtime.tcp_keepalive.store(n, Relaxed)))
}

fn set_requirepass(v: &[u8]) -> Result<Change, String> {
    let pass = (!v.is_empty()).then(|| v.to_vec());
    Ok(Box::new(move |s| {
        let rt = &s.config.runtime;
        rt.has_password.store(pass.is_some(), Relaxed);
        *rt.requirepass.write() = pass;
    }))
}

fn set_proto_max_bulk_len(v: &[u8]) -> Result<Change, String> {
    let n = memory_value(v, MB, i64::MAX as u64)? as usize;
    Ok(Box::new(move |s| s.config.runtime.proto_max_bulk_len.store(n, Relaxed)))
}

fn set_query_buffer_limit(v: &[u8]) -> Result<Change, String> {
    let n = memory_value(v, MB, i64::MAX as u64)? as usize;
    Ok(Box::new(move |s| s.config.runtime.client_query_buffer_limit.store(n, Relaxed)))
}

/// `<class> <hard> <soft> <soft seconds>` groups, as in redis.conf. Only the
/// hard limits of normal and pub/sub clients exist here.
fn set_obuf_limits(v: &[u8]) -> Result<Change, String> {
    let words: Vec<&str> = text(v)?.split_whitespace().collect();
    if words.is_empty() || words.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let (mut normal, mut pubsub) = (None, None);
    for group in words.chunks(4) {
        let class = group[0].to_ascii_lowercase();
        if !matches!(class.as_str(), "normal" | "slave" | "replica" | "pubsub") {
            return Err("Invalid client class specified in buffer limit configuration.".into());
        }
        let hard = parse_memory(group[1]);
        let soft = parse_memory(group[2]);
        let secs = group[3].parse::<i64>().ok().filter(|s| *s >= 0);
        let (Some(hard), Some(_), Some(_)) = (hard, soft, secs) else {
            return Err("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into());
        };
        match class.as_str() {
            "normal" => normal = Some(hard as usize),
            "pubsub" => pubsub = Some(hard as usize),
            _ => {}
        }
    }
    Ok(Box::new(move |s| {
        let rt = &s.config.runtime;
        if let Some(n) = normal {
            rt.obuf_limit_normal.store(n, Relaxed);
        }
        if let Some(n) = pubsub {
            rt.obuf_limit_pubsub.store(n, Relaxed);
        }
    }))
}

fn set_loglevel(v: &[u8]) -> Result<Change, String> {
    let level = enum_value(v, &["debug", "verbose", "notice", "warning"])?;
    Ok(Box::new(move |s| {
        *s.config.runtime.loglevel.write() = level.to_string();
        crate::logging::set_level(level);
    }))
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn set_adaptive_threads(v: &[u8]) -> Result<Change, String> {
    let on = enum_value(v, &["yes", "no"])? == "yes";
    Ok(Box::new(move |s| s.balance.set_adaptive(on)))
}

fn set_lfu_log_factor(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u32;
    Ok(Box::new(move |s| s.ks.set_lfu_log_factor(n)))
}

fn set_lfu_decay_time(v: &[u8]) -> Result<Change, String> {
    let n = int_value(v, 0, INT_MAX)? as u32;
    Ok(Box::new(move |s| s.ks.set_lfu_decay_minutes(n)))
}

fn no_change() -> Result<Change, String> {
    Ok(Box::new(|_| {}))
}

fn set_save(v: &[u8]) -> Result<Change, String> {
    if v.iter().all(u8::is_ascii_whitespace) {
        no_change()
    } else {
        Err("snapshotting (RDB) is not supported by this server".into())
    }
}

fn set_appendonly(v: &[u8]) -> Result<Change, String> {
    if eq_ic(v, "no") {
        no_change()
    } else if eq_ic(v, "yes") {
        Err("the append only file (AOF) is not supported by this server".into())
    } else {
        Err("argument must be 'yes' or 'no'".into())
    }
}

fn set_notify_keyspace_events(v: &[u8]) -> Result<Change, String> {
    if v.is_empty() { no_change() } else { Err("keyspace notifications are not supported by this server".into()) }
}

fn find_param(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| eq_ic(name, p.name))
}

fn config(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("config", CONFIG_SUBS, args)? {
        "get" => config_get(ctx.shared, &args[2..], out),
        "set" => config_set(ctx, &args[2..], out)?,
        "resetstat" => {
            reset_stats(ctx.shared);
            out.ok();
        }
        "rewrite" => {
            config_rewrite(ctx.shared)?;
            out.ok();
        }
        _ => help(out, CONFIG_HELP),
    }
    Ok(())
}

fn config_get(shared: &Shared, patterns: &[&[u8]], out: &mut Reply) {
    // Each parameter once, under the name it was first asked for by.
    let mut found: Vec<(String, &'static Param)> = Vec::new();
    let mut add = |name: String, p: &'static Param| {
        if !found.iter().any(|(_, q)| std::ptr::eq(*q, p)) {
            found.push((name, p));
        }
    };
    for pat in patterns {
        if pat.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
            for p in PARAMS.iter().filter(|p| glob_match(pat, p.name.as_bytes(), true)) {
                add(p.name.to_string(), p);
            }
        } else if let Some(p) = find_param(pat) {
            add(String::from_utf8_lossy(pat).into_owned(), p);
        }
    }
    out.map(found.len());
    for (name, p) in found {
        out.bulk(name.as_bytes());
        out.bulk((p.get)(shared).as_bytes());
    }
}

fn config_set(ctx: &mut Ctx<'_>, pairs: &[&[u8]], out: &mut Reply) -> CmdResult {
    if pairs.len() % 2 != 0 {
        return Err(err::SYNTAX.into());
    }
    let failed = |name: &str, why: &str| -> CmdError {
        format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}").into()
    };
    // Names first (unknown, immutable, duplicate): the first problem wins.
    let mut params: Vec<&'static Param> = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        let Some(p) = find_param(pair[0]) else {
            return Err(
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{}'", lossy(pair[0])).into()
            );
        };
        if p.set.is_none() {
            return Err(failed(&lossy(pair[0]), "can't set immutable config"));
        }
        if params.iter().any(|q| std::ptr::eq(*q, p)) {
            return Err(failed(&lossy(pair[0]), "duplicate parameter"));
        }
        params.push(p);
    }
    // Then values: nothing changes unless every value is valid.
    let mut changes = Vec::with_capacity(params.len());
    for (p, pair) in params.iter().zip(pairs.chunks(2)) {
        let setter = p.set.expect("checked above");
        changes.push(setter(pair[1]).map_err(|why| failed(p.name, &why))?);
    }
    for change in changes {
        change(ctx.shared);
    }
    if params.iter().any(|p| p.name == "maxmemory" || p.name == "maxmemory-policy") {
        evict_to_limit(ctx);
    }
    out.ok();
    Ok(())
}

/// After the limit is lowered, evict right away (as Redis does) rather than
/// at the next write.
fn evict_to_limit(ctx: &Ctx<'_>) {
    // Inside EXEC partitions are held: the next write outside it evicts.
    if ctx.in_exec {
        return;
    }
    let shared = ctx.shared;
    let mut last = u64::MAX;
    while shared.maxmemory() > 0 {
        let used = shared.used_memory();
        // Stop when under the limit, or when a round freed nothing.
        if used <= shared.maxmemory() || used >= last || crate::memory::ensure_memory(shared, ctx.keys.stats) {
            break;
        }
        last = used;
    }
}

fn reset_stats(shared: &Shared) {
    for w in &shared.workers {
        for c in w.cmds.iter() {
            c.reset();
        }
        w.server.reset();
        w.store.reset();
    }
    shared.stat_reset_time.store(unix_secs(), Relaxed);
}

/// Directives CONFIG REWRITE maintains — the runtime settings the config file
/// format accepts — with their defaults.
const REWRITTEN: &[(&str, &str)] = &[
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("maxclients", "10000"),
    ("timeout", "0"),
    ("tcp-keepalive", "300"),
    ("requirepass", ""),
    ("loglevel", "notice"),
    ("proto-max-bulk-len", "512mb"),
    ("client-query-buffer-limit", "1gb"),
    ("adaptive-threads", "yes"),
];

const REWRITE_MARKER: &str = "# Generated by CONFIG REWRITE";

fn config_rewrite(shared: &Shared) -> CmdResult {
    let Some(path) = shared.config.startup.config_file.as_ref() else {
        return Err("ERR The server is running without a config file".into());
    };
    let fail = |e: std::io::Error| CmdError::from(format!("ERR Rewriting config file: {e}"));
    let old = std::fs::read_to_string(path).map_err(fail)?;
    let new = rewrite_config_text(&old, |name| directive_value(shared, name));
    // Write a sibling file and rename it over: the file is never half-written.
    let mut tmp = path.clone().into_os_string();
    tmp.push(format!(".rewrite-{}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        // Keep the file's permissions (it may hold requirepass).
        f.set_permissions(std::fs::metadata(path)?.permissions())?;
        f.write_all(new.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// The value CONFIG REWRITE writes for a directive (memory in Redis's units).
fn directive_value(shared: &Shared, name: &str) -> String {
    let v = find_param(name.as_bytes()).map(|p| (p.get)(shared)).unwrap_or_default();
    match name {
        "maxmemory" | "proto-max-bulk-len" | "client-query-buffer-limit" => {
            v.parse::<u64>().map(format_memory).unwrap_or(v)
        }
        _ => v,
    }
}

/// Rewrites config text: managed directives take their current value in
/// place (later duplicates are dropped), missing non-default ones are
/// appended; every other line stays as it was.
fn rewrite_config_text(old: &str, value_of: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(old.len() + 256);
    let mut written: Vec<&str> = Vec::new();
    for line in old.lines() {
        let name = line.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        match REWRITTEN.iter().find(|(n, _)| *n == name) {
            Some(&(n, _)) => {
                if !written.contains(&n) {
                    written.push(n);
                    let _ = writeln!(out, "{n} {}", quote_config_value(&value_of(n)));
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let mut marker = old.lines().any(|l| l == REWRITE_MARKER);
    for &(n, default) in REWRITTEN {
        let v = value_of(n);
        if written.contains(&n) || v == default {
            continue;
        }
        if !marker {
            out.push_str(REWRITE_MARKER);
            out.push('\n');
            marker = true;
        }
        let _ = writeln!(out, "{n} {}", quote_config_value(&v));
    }
    out
}

/// Formats bytes as Redis's CONFIG REWRITE does (gb/mb/kb when exact).
fn format_memory(n: u64) -> String {
    const GB: u64 = 1024 * MB;
    match n {
        0 => "0".into(),
        n if n % GB == 0 => format!("{}gb", n / GB),
        n if n % MB == 0 => format!("{}mb", n / MB),
        n if n % 1024 == 0 => format!("{}kb", n / 1024),
        n => n.to_string(),
    }
}

/// Quotes a config file value when needed (the file is read with
/// `split_quoted`, which understands these escapes).
fn quote_config_value(v: &str) -> String {
    let plain = !v.is_empty() && v.bytes().all(|c| c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'\\'));
    if plain {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.bytes() {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b' ' => s.push(' '),
            c if c.is_ascii_graphic() => s.push(c as char),
            c => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
    s
}

// ---------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Every section, in output order.
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "cluster",
    "keyspace",
];

fn info(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let mut wanted: Vec<&str> = Vec::new();
    if args.len() == 1 {
        wanted.extend(DEFAULT_SECTIONS);
    }
    for a in &args[1..] {
        if eq_ic(a, "default") {
            wanted.extend(DEFAULT_SECTIONS);
        } else if eq_ic(a, "all") || eq_ic(a, "everything") {
            wanted.extend(ALL_SECTIONS);
        } else if let Some(s) = ALL_SECTIONS.iter().find(|s| eq_ic(a, s)) {
            wanted.push(s);
        }
    }
    let mut text = String::with_capacity(4096);
    for section in ALL_SECTIONS.iter().filter(|s| wanted.contains(s)) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        write_section(ctx, section, &mut text);
    }
    out.verbatim(text.as_bytes());
    Ok(())
}

/// Appends `name:value\r\n` to an INFO text.
macro_rules! field {
    ($out:expr, $name:expr, $($arg:tt)*) => {{
        let _ = write!($out, "{}:", $name);
        let _ = write!($out, $($arg)*);
        $out.push_str("\r\n");
    }};
}

fn write_section(ctx: &mut Ctx<'_>, section: &str, t: &mut String) {
    let shared = ctx.shared;
    let title = match section {
        "cpu" => "CPU".to_string(),
        s => format!("{}{}", s[..1].to_ascii_uppercase(), &s[1..]),
    };
    let _ = write!(t, "# {title}\r\n");
    match section {
        "server" => info_server(shared, t),
        "clients" => info_clients(shared, t),
        "memory" => info_memory(shared, t),
        "persistence" => info_persistence(shared, t),
        "stats" => info_stats(shared, t),
        "replication" => info_replication(shared, t),
        "cpu" => info_cpu(t),
        "commandstats" => info_commandstats(shared, t),
        "cluster" => field!(t, "cluster_enabled", "0"),
        "keyspace" => info_keyspace(ctx, t),
        // modules: there are none. errorstats: errors are not counted per code.
        _ => {}
    }
}

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn unix_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0)
}

/// Unix time (s) the server started: LASTSAVE and rdb_last_save_time.
fn start_time(shared: &Shared) -> u64 {
    (unix_micros().saturating_sub(shared.uptime().as_micros()) / 1_000_000) as u64
}

/// Redis's 24-bit LRU clock (seconds resolution).
fn lru_clock() -> u64 {
    unix_secs() & ((1 << 24) - 1)
}

fn uname() -> String {
    // SAFETY: uname fills a zeroed struct with NUL-terminated strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return std::env::consts::OS.into();
        }
        let s = |f: &[libc::c_char]| std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
        format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine))
    }
}

fn info_server(shared: &Shared, t: &mut String) {
    let sc = &shared.config.startup;
    let uptime = shared.uptime().as_secs();
    field!(t, "redis_version", "{REDIS_VERSION}");
    field!(t, "strata_version", "{}", env!("CARGO_PKG_VERSION"));
    field!(t, "redis_git_sha1", "00000000");
    field!(t, "redis_git_dirty", "0");
    field!(t, "redis_build_id", "0");
    field!(t, "redis_mode", "standalone");
    field!(t, "os", "{}", uname());
    field!(t, "arch_bits", "{}", usize::BITS);
    field!(t, "monotonic_clock", "POSIX clock_gettime");
    field!(t, "multiplexing_api", "epoll");
    field!(t, "process_id", "{}", std::process::id());
    field!(t, "process_supervised", "no");
    field!(t, "run_id", "{}", shared.run_id);
    field!(t, "tcp_port", "{}", shared.tcp_port.load(Relaxed));
    field!(t, "server_time_usec", "{}", unix_micros());
    field!(t, "uptime_in_seconds", "{uptime}");
    field!(t, "uptime_in_days", "{}", uptime / 86400);
    field!(t, "hz", "10");
    field!(t, "configured_hz", "10");
    field!(t, "lru_clock", "{}", lru_clock());
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
    field!(t, "executable", "{exe}");
    let conf = sc.config_file.as_deref().map(absolute).unwrap_or_default();
    field!(t, "config_file", "{conf}");
    field!(t, "io_threads_active", "0");
    field!(t, "strata_threads", "{}", sc.threads);
    field!(t, "strata_adaptive_threads", "{}", yes_no(shared.balance.adaptive()));
    field!(t, "strata_active_threads", "{}", shared.balance.active());
    field!(t, "strata_connection_migrations", "{}", shared.balance.migrations.load(Relaxed));
}

fn info_clients(shared: &Shared, t: &mut String) {
    let clients = shared.clients.all();
    let max_in = clients.iter().map(|c| c.qbuf.load(Relaxed)).max().unwrap_or(0);
    let max_out = clients.iter().map(|c| c.obuf.load(Relaxed) + c.pending_push.load(Relaxed)).max().unwrap_or(0);
    let blocked = clients.iter().filter(|c| c.blocked.load(Relaxed)).count();
    field!(t, "connected_clients", "{}", shared.clients.count());
    field!(t, "cluster_connections", "0");
    field!(t, "maxclients", "{}", shared.config.runtime.maxclients.load(Relaxed));
    field!(t, "client_recent_max_input_buffer", "{max_in}");
    field!(t, "client_recent_max_output_buffer", "{max_out}");
    field!(t, "blocked_clients", "{blocked}");
    field!(t, "tracking_clients", "0");
}

/// Redis's `bytesToHuman`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut d = n as f64 / 1024.0;
    for unit in UNITS {
        if d < 1024.0 {
            return format!("{d:.2}{unit}");
        }
        d /= 1024.0;
    }
    format!("{n}B")
}

/// Resident set size of the process, from /proc.
fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page
}

fn total_system_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next().and_then(|kb| kb.parse::<u64>().ok()));
    kb.unwrap_or(0) * 1024
}

/// Memory figures shared by INFO memory, MEMORY STATS and MEMORY DOCTOR.
struct MemSnapshot {
    used: u64,
    peak: u64,
    dataset: u64,
    clients: u64,
    rss: u64,
}

fn mem_snapshot(shared: &Shared) -> MemSnapshot {
    let used = shared.used_memory();
    let peak = shared.used_memory_peak.fetch_max(used, Relaxed).max(used);
    MemSnapshot {
        used,
        peak,
        dataset: shared.ks.used_memory().max(0) as u64,
        clients: shared.conn_mem.load(Relaxed).max(0) as u64,
        rss: rss_bytes(),
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

fn info_memory(shared: &Shared, t: &mut String) {
    let m = mem_snapshot(shared);
    let max = shared.maxmemory();
    let total = total_system_memory();
    field!(t, "used_memory", "{}", m.used);
    field!(t, "used_memory_human", "{}", human_bytes(m.used));
    field!(t, "used_memory_rss", "{}", m.rss);
    field!(t, "used_memory_rss_human", "{}", human_bytes(m.rss));
    field!(t, "used_memory_peak", "{}", m.peak);
    field!(t, "used_memory_peak_human", "{}", human_bytes(m.peak));
    field!(t, "used_memory_peak_perc", "{:.2}%", ratio(m.used, m.peak) * 100.0);
    field!(t, "used_memory_overhead", "{}", m.used.saturating_sub(m.dataset));
    field!(t, "used_memory_dataset", "{}", m.dataset);
    field!(t, "used_memory_dataset_perc", "{:.2}%", ratio(m.dataset, m.used) * 100.0);
    field!(t, "total_system_memory", "{total}");
    field!(t, "total_system_memory_human", "{}", human_bytes(total));
    field!(t, "maxmemory", "{max}");
    field!(t, "maxmemory_human", "{}", human_bytes(max));
    field!(t, "maxmemory_policy", "{}", shared.config.runtime.policy_name());
    field!(t, "mem_fragmentation_ratio", "{:.2}", ratio(m.rss, m.used));
    field!(t, "mem_fragmentation_bytes", "{}", m.rss as i64 - m.used as i64);
    field!(t, "mem_not_counted_for_evict", "0");
    field!(t, "mem_clients_slaves", "0");
    field!(t, "mem_clients_normal", "{}", m.clients);
    field!(t, "mem_allocator", "libc");
    field!(t, "lazyfree_pending_objects", "0");
    field!(t, "lazyfreed_objects", "0");
}

fn info_persistence(shared: &Shared, t: &mut String) {
    // There is no RDB or AOF: nothing is ever loaded or saved.
    field!(t, "loading", "0");
    field!(t, "async_loading", "0");
    field!(t, "rdb_changes_since_last_save", "0");
    field!(t, "rdb_bgsave_in_progress", "0");
    field!(t, "rdb_last_save_time", "{}", start_time(shared));
    field!(t, "rdb_last_bgsave_status", "ok");
    field!(t, "rdb_last_bgsave_time_sec", "-1");
    field!(t, "rdb_current_bgsave_time_sec", "-1");
    field!(t, "rdb_saves", "0");
    field!(t, "aof_enabled", "0");
    field!(t, "aof_rewrite_in_progress", "0");
    field!(t, "aof_rewrite_scheduled", "0");
    field!(t, "aof_last_rewrite_time_sec", "-1");
    field!(t, "aof_current_rewrite_time_sec", "-1");
    field!(t, "aof_last_bgrewrite_status", "ok");
    field!(t, "aof_rewrites", "0");
    field!(t, "aof_last_write_status", "ok");
    // Strata's own: the durability mode asked for, and what this build does.
    field!(t, "strata_durability", "{}", shared.config.startup.durability);
    field!(t, "strata_durability_effective", "none");
}

fn info_stats(shared: &Shared, t: &mut String) {
    use crate::metrics::{WorkerMetrics, sum};
    use std::sync::atomic::AtomicU64;
    let total = |f: fn(&WorkerMetrics) -> &AtomicU64| sum(&shared.workers, f);
    let store = shared.store_totals();
    field!(t, "total_connections_received", "{}", total(|m| &m.server.connections_received));
    field!(t, "total_commands_processed", "{}", shared.total_commands());
    field!(t, "instantaneous_ops_per_sec", "{}", shared.ops_samples.lock().ops_per_sec());
    field!(t, "total_net_input_bytes", "{}", total(|m| &m.server.net_input_bytes));
    field!(t, "total_net_output_bytes", "{}", total(|m| &m.server.net_output_bytes));
    field!(t, "rejected_connections", "{}", total(|m| &m.server.rejected_connections));
    field!(t, "expired_keys", "{}", store.expired);
    field!(t, "evicted_keys", "{}", store.evicted);
    field!(t, "evicted_clients", "0");
    field!(t, "keyspace_hits", "{}", store.hits);
    field!(t, "keyspace_misses", "{}", store.misses);
    field!(t, "pubsub_channels", "{}", shared.pubsub.num_channels());
    field!(t, "pubsub_patterns", "{}", shared.pubsub.num_patterns());
    field!(t, "pubsubshard_channels", "0");
    field!(t, "total_protocol_errors", "{}", total(|m| &m.server.protocol_errors));
    field!(t, "client_output_buffer_limit_disconnections", "{}", total(|m| &m.server.output_buffer_disconnects));
    field!(t, "strata_evicted_bytes", "{}", store.evicted_bytes);
}

fn info_replication(shared: &Shared, t: &mut String) {
    field!(t, "role", "master");
    field!(t, "connected_slaves", "0");
    field!(t, "master_failover_state", "no-failover");
    field!(t, "master_replid", "{}", shared.run_id);
    field!(t, "master_replid2", "{}", "0".repeat(40));
    field!(t, "master_repl_offset", "0");
    field!(t, "second_repl_offset", "-1");
    field!(t, "repl_backlog_active", "0");
    field!(t, "repl_backlog_size", "1048576");
    field!(t, "repl_backlog_first_byte_offset", "0");
    field!(t, "repl_backlog_histlen", "0");
}

/// (system, user) CPU seconds.
fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills a zeroed struct.
    unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut r) != 0 {
            return (0.0, 0.0);
        }
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        (secs(r.ru_stime), secs(r.ru_utime))
    }
}

fn info_cpu(t: &mut String) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    field!(t, "used_cpu_sys", "{sys:.6}");
    field!(t, "used_cpu_user", "{user:.6}");
    field!(t, "used_cpu_sys_children", "{csys:.6}");
    field!(t, "used_cpu_user_children", "{cuser:.6}");
}

fn info_commandstats(shared: &Shared, t: &mut String) {
    use crate::metrics::CmdStat;
    use std::sync::atomic::AtomicU64;
    for (idx, def) in shared.table.iter() {
        let total = |f: fn(&CmdStat) -> &AtomicU64| -> u64 {
            shared.workers.iter().map(|w| f(&w.cmds[idx]).load(Relaxed)).sum()
        };
        let calls = total(|c| &c.calls);
        let usec = total(|c| &c.usec);
        let rejected = total(|c| &c.rejected);
        let failed = total(|c| &c.failed);
        if calls == 0 && rejected == 0 && failed == 0 {
            continue;
        }
        let per_call = if calls == 0 { 0.0 } else { usec as f64 / calls as f64 };
        let _ = write!(
            t,
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},\
             failed_calls={failed}\r\n",
            def.name
        );
    }
}

/// Key and TTL counts of one database.
#[derive(Default, Clone, Copy)]
struct DbCounts {
    keys: u64,
    expires: u64,
    ttl_sum_ms: u128,
}

fn keyspace_counts(ctx: &mut Ctx<'_>) -> [DbCounts; NUM_DBS] {
    let now = ctx.keys.now_ms;
    let mut counts = [DbCounts::default(); NUM_DBS];
    ctx.keys.for_each_partition(|part| {
        for (db, c) in counts.iter_mut().enumerate() {
            let d = &part.dbs[db];
            c.keys += d.len() as u64;
            c.expires += d.expires.len() as u64;
            c.ttl_sum_ms += d.expires.iter().map(|&(at, _)| at.saturating_sub(now) as u128).sum::<u128>();
        }
    });
    counts
}

fn info_keyspace(ctx: &mut Ctx<'_>, t: &mut String) {
    for (db, c) in keyspace_counts(ctx).iter().enumerate() {
        if c.keys == 0 {
            continue;
        }
        let avg_ttl = if c.expires == 0 { 0 } else { c.ttl_sum_ms / c.expires as u128 };
        let _ = write!(t, "db{db}:keys={},expires={},avg_ttl={avg_ttl}\r\n", c.keys, c.expires);
    }
}

// ---------------------------------------------------------------------------
// Keyspace-wide commands
// ---------------------------------------------------------------------------

fn dbsize(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let db = ctx.keys.db;
    let mut n = 0;
    ctx.keys.for_each_partition(|part| n += part.dbs[db].len());
    out.int(n as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL take an optional ASYNC or SYNC (both flush at once here).
fn flush_mode(args: &[&[u8]]) -> CmdResult {
    match args.len() {
        1 => Ok(()),
        2 if eq_ic(args[1], "async") || eq_ic(args[1], "sync") => Ok(()),
        _ => Err(err::SYNTAX.into()),
    }
}

/// A WATCHed key in a partition: (database, key).
type WatchKey = (u8, Box<[u8]>);

/// Empties `db` in one partition. Redis 7.0 invalidates WATCH only for
/// watched keys that existed; `clear_db` bumps every watched key of the
/// database, so absent watched keys get their versions back.
fn flush_partition_db(ks: &Keyspace, part: &mut Partition, db: usize) {
    let absent: Vec<(WatchKey, u64)> = part
        .watched
        .iter()
        .filter(|((d, k), _)| *d as usize == db && part.dbs[db].find(hash_bytes(k), k).is_none())
        .map(|(k, w)| (k.clone(), w.version))
        .collect();
    clear_db(ks, part, db);
    for (k, version) in absent {
        if let Some(w) = part.watched.get_mut(&k) {
            w.version = version;
        }
    }
}

fn flushdb(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    flush_mode(args)?;
    let (ks, db) = (ctx.keys.ks, ctx.keys.db);
    ctx.keys.for_each_partition(|part| flush_partition_db(ks, part, db));
    out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    flush_mode(args)?;
    let ks = ctx.keys.ks;
    ctx.keys.for_each_partition(|part| (0..NUM_DBS).for_each(|db| flush_partition_db(ks, part, db)));
    out.ok();
    Ok(())
}

fn swapdb(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let a = crate::util::parse_i64(args[1]).ok_or(CmdError::from("ERR invalid first DB index"))?;
    let b = crate::util::parse_i64(args[2]).ok_or(CmdError::from("ERR invalid second DB index"))?;
    let range = 0..NUM_DBS as i64;
    if !range.contains(&a) || !range.contains(&b) {
        return Err("ERR DB index is out of range".into());
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        ctx.keys.for_each_partition(|part| swap_partition_dbs(part, a, b));
    }
    out.ok();
    Ok(())
}

/// Swaps two databases in one partition. WATCHers of keys that exist in
/// either are invalidated; clients blocked on either database retry.
fn swap_partition_dbs(part: &mut Partition, a: usize, b: usize) {
    part.dbs.swap(a, b);
    let Partition { dbs, watched, blocked, .. } = part;
    for ((d, key), w) in watched.iter_mut() {
        let d = *d as usize;
        if (d == a || d == b) && [a, b].iter().any(|&x| dbs[x].find(hash_bytes(key), key).is_some()) {
            w.version += 1;
        }
    }
    let waiting: Vec<WatchKey> =
        blocked.keys().filter(|(d, _)| *d as usize == a || *d as usize == b).cloned().collect();
    for (d, key) in waiting {
        part.signal_ready(d as usize, &key);
    }
}

// ---------------------------------------------------------------------------
// TIME, LASTSAVE, ROLE, SHUTDOWN
// ---------------------------------------------------------------------------

fn time(_ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let now = unix_micros();
    out.array(2);
    out.bulk((now / 1_000_000).to_string().as_bytes());
    out.bulk((now % 1_000_000).to_string().as_bytes());
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    // Nothing is ever saved: like a Redis that never saved, report start-up.
    out.int(start_time(ctx.shared) as i64);
    Ok(())
}

fn role(_ctx: &mut Ctx<'_>, _args: &[&[u8]], out: &mut Reply) -> CmdResult {
    out.array(3);
    out.bulk(b"master");
    out.int(0);
    out.array(0);
    Ok(())
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[&[u8]], _out: &mut Reply) -> CmdResult {
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for a in &args[1..] {
        if eq_ic(a, "nosave") {
            nosave = true;
        } else if eq_ic(a, "save") {
            save = true;
        } else if eq_ic(a, "abort") {
            abort = true;
        } else if !(eq_ic(a, "now") || eq_ic(a, "force")) {
            return Err(err::SYNTAX.into());
        }
    }
    if (nosave && save) || (abort && args.len() > 2) {
        return Err(err::SYNTAX.into());
    }
    if abort {
        return Err("ERR No shutdown in progress.".into());
    }
    if save {
        tracing::warn!("SHUTDOWN SAVE refused: this server has no RDB persistence");
        return Err("ERR Errors trying to SHUTDOWN. Check logs.".into());
    }
    tracing::warn!(client = ctx.client.id(), "user requested shutdown");
    ctx.shared.shutting_down.store(true, Relaxed);
    ctx.shared.shutdown.send_replace(true);
    // Like Redis: no reply, the connection just closes.
    ctx.client.close_after_reply = true;
    Ok(())
}

// ---------------------------------------------------------------------------
// DEBUG
// ---------------------------------------------------------------------------

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "ACTIVE-THREADS <count>",
    "    Serve from the first <count> worker threads now, moving connections",
    "    as adaptive-threads would (Strata only).",
    "HELP",
    "    Prints this help.",
];

/// DEBUG OBJECT locks its key; other subcommands have none.
fn debug_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut v = SmallVec::new();
    if args.len() == 3 && eq_ic(args[1], "object") {
        v.push(2);
    }
    v
}

fn debug(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sub = args[1];
    if eq_ic(sub, "help") && args.len() == 2 {
        help(out, DEBUG_HELP);
    } else if eq_ic(sub, "sleep") && args.len() == 3 {
        // Like Redis (strtod): a number that does not parse sleeps for 0 s.
        let secs = crate::util::parse_f64(args[2]).unwrap_or(0.0);
        if secs > 0.0 && secs.is_finite() {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(1e9)));
        }
        out.ok();
    } else if eq_ic(sub, "active-threads") && args.len() == 3 {
        let threads = ctx.shared.config.startup.threads as i64;
        let n = int_value(args[2], 1, threads).map_err(|e| CmdError::from(format!("ERR {e}")))?;
        ctx.shared.balance.set_active(n as usize);
        out.ok();
    } else if eq_ic(sub, "object") && args.len() == 3 {
        let clock = ctx.keys.ks.clock_secs();
        let Some(e) = ctx.keys.peek(args[2]) else {
            return Err(err::NO_SUCH_KEY.into());
        };
        let idle = clock.saturating_sub(e.meta.last_access) as u64;
        let lru = lru_clock().wrapping_sub(idle) & ((1 << 24) - 1);
        let text = format!(
            "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{lru} lru_seconds_idle:{idle}",
            e.value(),
            e.value().encoding(),
            serialized_len(e.value()),
        );
        out.simple(&text);
    } else {
        return Err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            lossy(sub)
        )
        .into());
    }
    Ok(())
}

/// An estimate of a value's RDB-serialized size: exact for strings short
/// enough not to be compressed, the in-memory footprint for collections.
fn serialized_len(v: &Value) -> usize {
    match v {
        Value::Str(s) => match crate::util::parse_i64(s) {
            Some(n) if i8::try_from(n).is_ok() => 2,
            Some(n) if i16::try_from(n).is_ok() => 3,
            Some(n) if i32::try_from(n).is_ok() => 5,
            _ => {
                let prefix = match s.len() {
                    0..64 => 1,
                    64..16384 => 2,
                    n if n as u64 <= u32::MAX as u64 => 5,
                    _ => 9,
                };
                prefix + s.len()
            }
        },
        other => other.mem_bytes(),
    }
}

// ---------------------------------------------------------------------------
// MEMORY
// ---------------------------------------------------------------------------

const MEMORY_SUBS: &[&str] = &["usage", "stats", "doctor", "malloc-stats", "purge", "help"];

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

fn memory(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    match subcommand("memory", MEMORY_SUBS, args)? {
        "usage" => {
            for pair in args[3..].chunks(2) {
                if pair.len() != 2 || !eq_ic(pair[0], "samples") {
                    return Err(err::SYNTAX.into());
                }
                // Sizes are tracked exactly, so SAMPLES is only validated.
                if arg_i64(pair[1])? < 0 {
                    return Err(err::SYNTAX.into());
                }
            }
            // Like Redis, a plain lookup: no expiry check, no statistics.
            let (key, db) = (args[2], ctx.keys.db);
            let idx = ctx.keys.ks.partition_of_key(key);
            let mem = ctx.keys.with_partition(idx, |part| {
                let d = &part.dbs[db];
                d.find(hash_bytes(key), key).map(|slot| d.entry(slot).mem())
            });
            match mem {
                Some(bytes) => out.int(bytes as i64),
                None => out.null(),
            }
        }
        "stats" => memory_stats(ctx, out),
        "doctor" => out.verbatim(memory_doctor(ctx.shared).as_bytes()),
        "malloc-stats" => out.bulk(b"Stats not supported for the current allocator"),
        "purge" => {
            purge_allocator();
            out.ok();
        }
        _ => help(out, MEMORY_HELP),
    }
    Ok(())
}

/// MEMORY PURGE: hands freed heap pages back to the OS.
fn purge_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn memory_stats(ctx: &mut Ctx<'_>, out: &mut Reply) {
    use crate::store::partition::{ENTRY_OVERHEAD, EXPIRE_OVERHEAD};
    let m = mem_snapshot(ctx.shared);
    let counts = keyspace_counts(ctx);
    let startup = m.used.saturating_sub(m.dataset + m.clients);
    let keys: u64 = counts.iter().map(|c| c.keys).sum();
    let dbs: Vec<(usize, &DbCounts)> = counts.iter().enumerate().filter(|(_, c)| c.keys > 0).collect();
    let net = m.used.saturating_sub(startup);
    let int = |out: &mut Reply, name: &str, v: u64| {
        out.bulk(name.as_bytes());
        out.int(v as i64);
    };
    out.map(19 + dbs.len());
    int(out, "peak.allocated", m.peak);
    int(out, "total.allocated", m.used);
    int(out, "startup.allocated", startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", m.clients);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    for (db, c) in &dbs {
        out.bulk(format!("db.{db}").as_bytes());
        out.map(2);
        int(out, "overhead.hashtable.main", c.keys * ENTRY_OVERHEAD as u64);
        int(out, "overhead.hashtable.expires", c.expires * EXPIRE_OVERHEAD as u64);
    }
    int(out, "overhead.total", m.used.saturating_sub(m.dataset));
    int(out, "keys.count", keys);
    int(out, "keys.bytes-per-key", net.checked_div(keys).unwrap_or(0));
    int(out, "dataset.bytes", m.dataset);
    out.bulk(b"dataset.percentage");
    out.double(ratio(m.dataset, net) * 100.0);
    out.bulk(b"peak.percentage");
    out.double(ratio(m.used, m.peak) * 100.0);
    out.bulk(b"fragmentation");
    out.double(ratio(m.rss, m.used));
    int(out, "fragmentation.bytes", m.rss.saturating_sub(m.used));
    int(out, "rss.bytes", m.rss);
}

/// MEMORY DOCTOR: Redis's report, for the issues that can arise here.
fn memory_doctor(shared: &Shared) -> String {
    let m = mem_snapshot(shared);
    if m.used < 5 * MB {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in \
                these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and \
                I will be back to our programming as soon as I finished rebooting.\n"
            .into();
    }
    let mut issues = String::new();
    if ratio(m.peak, m.used) > 1.5 {
        issues.push_str(
            " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The \
             allocator is normally not able to release memory after a peak, so you can expect to see a big \
             fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the \
             Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as \
             soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want \
             to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to \
             shutdown and restart the instance.\n\n",
        );
    }
    if ratio(m.rss, m.used) > 1.4 && m.rss.saturating_sub(m.used) > 10 * MB {
        issues.push_str(
            " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this \
             means that the Resident Set Size of the Redis process is much larger than the sum of the logical \
             allocations Redis performed). This problem is usually due either to a large peak memory (check if \
             there is a peak memory entry above in the report) or may result from a workload that causes the \
             allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue.\n\n",
        );
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this \
                base.\n"
            .into();
    }
    format!(
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n{issues}I'm here to keep you safe, \
         Sam. I want to help you.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_like_redis() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(990912), "967.69K");
        assert_eq!(human_bytes(104857600), "100.00M");
        assert_eq!(human_bytes(3 << 30), "3.00G");
    }

    #[test]
    fn memory_units_for_rewrite() {
        assert_eq!(format_memory(0), "0");
        assert_eq!(format_memory(100 * MB), "100mb");
        assert_eq!(format_memory(2 << 30), "2gb");
        assert_eq!(format_memory(3072), "3kb");
        assert_eq!(format_memory(1000), "1000");
    }

    #[test]
    fn config_values_quoted_when_needed() {
        assert_eq!(quote_config_value("allkeys-lru"), "allkeys-lru");
        assert_eq!(quote_config_value(""), "\"\"");
        assert_eq!(quote_config_value("a b\"c"), "\"a b\\\"c\"");
        for v in ["p\\w\x01 x", "", "it's"] {
            let parsed = crate::protocol::split_quoted(quote_config_value(v).as_bytes()).unwrap();
            assert_eq!(parsed, vec![v.as_bytes().to_vec()], "{v:?}");
        }
    }

    fn defaults_with(name: &str, over: &[(&str, &str)]) -> String {
        over.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| REWRITTEN.iter().find(|(n, _)| *n == name).unwrap().1.to_string())
    }

    #[test]
    fn rewrite_replaces_in_place_and_appends() {
        let old = "# my conf\nport 7000\nmaxmemory 10mb\nMAXMEMORY 20mb\n# maxmemory-policy x\n";
        let set = [("maxmemory", "64mb"), ("maxmemory-policy", "allkeys-lru")];
        let new = rewrite_config_text(old, |n| defaults_with(n, &set));
        assert_eq!(
            new,
            "# my conf\nport 7000\nmaxmemory 64mb\n# maxmemory-policy x\n# Generated by CONFIG REWRITE\n\
             maxmemory-policy allkeys-lru\n"
        );
        // Idempotent: a second rewrite changes nothing.
        assert_eq!(rewrite_config_text(&new, |n| defaults_with(n, &set)), new);
        // A directive back at its default stays in place with that value.
        let back = rewrite_config_text(&new, |n| defaults_with(n, &[]));
        assert!(back.contains("\nmaxmemory 0\n") && back.contains("\nmaxmemory-policy noeviction\n"), "{back}");
    }

    #[test]
    fn serialized_lengths_of_strings() {
        assert_eq!(serialized_len(&Value::Str(b"12345".to_vec())), 3);
        assert_eq!(serialized_len(&Value::Str(b"7".to_vec())), 2);
        assert_eq!(serialized_len(&Value::Str(b"hello".to_vec())), 6);
    }

    #[test]
    fn every_supported_subcommand_has_metadata() {
        let containers: [(&str, &[&str]); 4] = [
            ("command", COMMAND_SUBS),
            ("config", CONFIG_SUBS),
            ("memory", MEMORY_SUBS),
            ("client", super::super::connection::COMMANDS.iter().find(|c| c.name == "client").unwrap().subcommands),
        ];
        for (container, subs) in containers {
            for s in subs {
                assert!(sub_def(&format!("{container}|{s}")).is_some(), "{container}|{s}");
            }
        }
    }

    #[test]
    fn categories_and_flags_follow_redis_rules() {
        let def = CommandDef::new("get", 2, flags::READONLY | flags::FAST, Keys::Range(1, 1, 1), dbsize)
            .acl("@string @fast @read");
        let v = CmdView::of(&def);
        assert_eq!(v.categories().as_slice(), ["read", "string", "fast"]);
        assert_eq!(v.flag_names().as_slice(), ["readonly", "fast"]);
        let def = CommandDef::new("flushall", -1, flags::WRITE, Keys::All, dbsize).acl("@keyspace @dangerous");
        assert_eq!(CmdView::of(&def).categories().as_slice(), ["keyspace", "write", "slow", "dangerous"]);
        let shutdown = COMMANDS.iter().find(|c| c.name == "shutdown").unwrap();
        assert_eq!(
            CmdView::of(shutdown).flag_names().as_slice(),
            ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"]
        );
    }
}
