//! COMMAND (COUNT, DOCS, GETKEYS, INFO, LIST) and the metadata it reports:
//! flags, ACL categories, key ranges and docs of commands and of container
//! subcommands (CLIENT LIST, CONFIG GET, ...), whose arity checks and
//! unknown-subcommand errors follow Redis 7.0.

use super::Node;
use super::args::{help, subcommand};
use super::{CmdError, CmdResult, CommandDef, Ctx, Keys, err, flags};
use crate::base::{eq_ic, glob_match};
use crate::protocol::Reply;
use smallvec::SmallVec;

use super::subcommands::{LS, sub_def};

pub const COMMANDS: &[CommandDef] =
    &[CommandDef::new("command", -1, LS, Keys::None, command).acl("@slow @connection").subs(COMMAND_SUBS)];

/// Every command and subcommand as ACL rules name them, with their
/// categories: entry i is command-table entry i; subcommands follow.
pub fn acl_catalog(shared_table: &super::table::CommandTable) -> crate::session::acl::Catalog {
    use crate::session::acl::CatalogEntry;
    let mut entries: Vec<CatalogEntry> = shared_table
        .iter()
        .map(|(_, def)| CatalogEntry {
            name: def.name.into(),
            parent: None,
            categories: CmdView::of(def).category_mask(),
        })
        .collect();
    for (i, def) in shared_table.iter() {
        for sub in CmdView::of(def).subs {
            entries.push(CatalogEntry { categories: sub.category_mask(), name: sub.name, parent: Some(i) });
        }
    }
    crate::session::acl::Catalog::new(entries)
}

const COMMAND_SUBS: &[&str] = &["count", "docs", "getkeys", "getkeysandflags", "help", "info", "list"];

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
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

/// ACL categories in the order Redis lists them.
use crate::session::acl::CATEGORIES as ACL_CATEGORIES;

/// Command flags as COMMAND INFO shows them: each flag's name, in Redis's
/// order, and the ACL categories Redis implies from it.
const FLAG_INFO: &[(u32, &str, &[&str])] = &[
    (flags::WRITE, "write", &["write"]),
    (flags::READONLY, "readonly", &[]),
    (flags::DENYOOM, "denyoom", &[]),
    (flags::ADMIN, "admin", &["admin", "dangerous"]),
    (flags::PUBSUB, "pubsub", &["pubsub"]),
    (flags::NOSCRIPT, "noscript", &[]),
    (flags::BLOCKING, "blocking", &["blocking"]),
    (flags::LOADING, "loading", &[]),
    (flags::STALE, "stale", &[]),
    (flags::FAST, "fast", &["fast"]),
    (flags::NO_AUTH, "no_auth", &[]),
    (flags::NO_MULTI, "no_multi", &[]),
    (flags::ALLOW_BUSY, "allow_busy", &[]),
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
        let mut v = SmallVec::new();
        for &(bit, name, _) in FLAG_INFO {
            match name {
                "fast" if self.name == "exec" => v.push("skip_slowlog"),
                // WATCH refuses MULTI through this flag, but Redis does not list it.
                "no_multi" if self.name == "watch" => continue,
                "allow_busy" if self.movable => v.push("movablekeys"),
                _ => {}
            }
            if self.flags & bit != 0 {
                v.push(name);
            }
        }
        v
    }

    /// Declared categories plus those Redis implies from the flags.
    fn categories(&self) -> SmallVec<[&'static str; 8]> {
        let set = self.category_mask();
        ACL_CATEGORIES.iter().enumerate().filter(|(i, _)| set & (1 << i) != 0).map(|(_, c)| *c).collect()
    }

    /// The categories as bits (bit i: `ACL_CATEGORIES[i]`).
    fn category_mask(&self) -> u32 {
        let bit = |name: &str| 1u32 << ACL_CATEGORIES.iter().position(|c| *c == name).expect("known category");
        let mut set = 0u32;
        for word in self.acl.split_whitespace() {
            let word = word.trim_start_matches('@');
            if let Some(i) = ACL_CATEGORIES.iter().position(|c| c.eq_ignore_ascii_case(word)) {
                set |= 1 << i;
            }
        }
        let f = self.flags;
        for &(flag, _, implied) in FLAG_INFO {
            if f & flag != 0 {
                implied.iter().for_each(|cat| set |= bit(cat));
            }
        }
        if f & flags::READONLY != 0 && set & bit("scripting") == 0 {
            set |= bit("read");
        }
        if set & bit("fast") == 0 {
            set |= bit("slow");
        }
        set
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
        // Some commands (MONITOR) document no complexity.
        let fields = doc.map_or(1, |d| if d.4.is_empty() { 3 } else { 4 }) + usize::from(!self.subs.is_empty());
        out.map(fields);
        if let Some(&(_, summary, since, _, _)) = doc {
            out.bulk(b"summary");
            out.bulk(summary.as_bytes());
            out.bulk(b"since");
            out.bulk(since.as_bytes());
        }
        out.bulk(b"group");
        out.bulk(group.as_bytes());
        if let Some(&(_, _, _, _, complexity)) = doc
            && !complexity.is_empty()
        {
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
    ("monitor", "Listen for all requests received by the server in real time", "1.0.0", "server", ""),
    ("client", "A container for client connection commands", "2.4.0", "connection", "Depends on subcommand."),
    ("client|caching", "Instruct the server about tracking or not keys in the next request", "6.0.0", "connection", "O(1)"),
    ("client|getname", "Get the current connection name", "2.6.9", "connection", "O(1)"),
    ("client|getredir", "Get tracking notifications redirection client ID if any", "6.0.0", "connection", "O(1)"),
    ("client|help", "Show helpful text about the different subcommands", "5.0.0", "connection", "O(1)"),
    ("client|id", "Returns the client ID for the current connection", "5.0.0", "connection", "O(1)"),
    ("client|info", "Returns information about the current client connection.", "6.2.0", "connection", "O(1)"),
    ("client|kill", "Kill the connection of a client", "2.4.0", "connection", "O(N) where N is the number of client connections"),
    ("client|list", "Get the list of client connections", "2.4.0", "connection", "O(N) where N is the number of client connections"),
    ("client|no-evict", "Set client eviction mode for the current connection", "7.0.0", "connection", "O(1)"),
    ("client|no-touch", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys", "7.2.0", "connection", "O(1)"),
    ("client|pause", "Stop processing commands from clients for some time", "3.0.0", "connection", "O(1)"),
    ("client|reply", "Instruct the server whether to reply to commands", "3.2.0", "connection", "O(1)"),
    ("client|setinfo", "Set client or connection specific info", "7.2.0", "connection", "O(1)"),
    ("client|setname", "Set the current connection name", "2.6.9", "connection", "O(1)"),
    ("client|tracking", "Enable or disable server assisted client side caching support", "6.0.0", "connection", "O(1). Some options may introduce additional complexity."),
    ("client|unblock", "Unblock a client blocked in a blocking command from a different connection", "5.0.0", "connection", "O(log N) where N is the number of client connections"),
    ("client|unpause", "Resume processing of clients that were paused", "6.2.0", "connection", "O(N) Where N is the number of paused clients"),
    ("client|trackinginfo", "Return information about server assisted client side caching for the current connection", "6.2.0", "connection", "O(1)"),
    ("command", "Get array of Redis command details", "2.8.13", "server", "O(N) where N is the total number of Redis commands"),
    ("command|count", "Get total number of Redis commands", "2.8.13", "server", "O(1)"),
    ("command|docs", "Get array of specific Redis command documentation", "7.0.0", "server", "O(N) where N is the number of commands to look up"),
    ("command|getkeys", "Extract keys given a full Redis command", "2.8.13", "server", "O(N) where N is the number of arguments to the command"),
    ("command|getkeysandflags", "Extract keys and access flags given a full Redis command", "7.0.0", "server", "O(N) where N is the number of arguments to the command"),
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
    ("latency", "A container for latency diagnostics commands", "2.8.13", "server", "Depends on subcommand."),
    ("latency|doctor", "Return a human readable latency analysis report.", "2.8.13", "server", "O(1)"),
    ("latency|graph", "Return a latency graph for the event.", "2.8.13", "server", "O(1)"),
    ("latency|histogram", "Return the cumulative distribution of latencies of a subset of commands or all.", "7.0.0", "server", "O(N) where N is the number of commands with latency information being retrieved."),
    ("latency|help", "Show helpful text about the different subcommands.", "2.8.13", "server", "O(1)"),
    ("latency|history", "Return timestamp-latency samples for the event.", "2.8.13", "server", "O(1)"),
    ("latency|latest", "Return the latest latency samples for all events.", "2.8.13", "server", "O(1)"),
    ("latency|reset", "Reset latency data for one or more events.", "2.8.13", "server", "O(1)"),
    ("memory", "A container for memory diagnostics commands", "4.0.0", "server", "Depends on subcommand."),
    ("memory|doctor", "Outputs memory problems report", "4.0.0", "server", "O(1)"),
    ("memory|help", "Show helpful text about the different subcommands", "4.0.0", "server", "O(1)"),
    ("memory|malloc-stats", "Show allocator internal stats", "4.0.0", "server", "Depends on how much memory is allocated, could be slow"),
    ("memory|purge", "Ask the allocator to release memory", "4.0.0", "server", "Depends on how much memory is allocated, could be slow"),
    ("memory|stats", "Show memory usage details", "4.0.0", "server", "O(1)"),
    ("memory|usage", "Estimate the memory usage of a key", "4.0.0", "server", "O(N) where N is the number of samples."),
    ("slowlog", "A container for slow log commands", "2.2.12", "server", "Depends on subcommand."),
    ("slowlog|get", "Get the slow log's entries", "2.2.12", "server", "O(N) where N is the number of entries returned"),
    ("slowlog|help", "Show helpful text about the different subcommands", "6.2.0", "server", "O(1)"),
    ("slowlog|len", "Get the slow log's length", "2.2.12", "server", "O(1)"),
    ("slowlog|reset", "Clear all entries from the slow log", "2.2.12", "server", "O(N) where N is the number of entries in the slowlog"),
    ("role", "Return the role of the instance in the context of replication", "2.8.12", "server", "O(1)"),
    ("shutdown", "Synchronously save the dataset to disk and then shut down the server", "1.0.0", "server", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)"),
];

/// Looks up a command by name, or a subcommand by `container|sub`.
fn find_view(node: &Node, name: &[u8]) -> Option<CmdView> {
    if let Some(idx) = node.table.lookup(name) {
        return Some(CmdView::of(node.table.get(idx)));
    }
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    let (container, sub) = name.split_once('|')?;
    let def = node.table.get(node.table.lookup(container.as_bytes())?);
    def.subcommands.contains(&sub).then(|| CmdView::of_sub(def.name, sub))
}

fn write_all_info(node: &Node, out: &mut Reply) {
    out.array(node.table.len());
    for (_, def) in node.table.iter() {
        CmdView::of(def).write_info(out);
    }
}

fn command(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let node = ctx.node;
    if args.len() == 1 {
        write_all_info(node, out);
        return Ok(());
    }
    match subcommand("command", COMMAND_SUBS, args)? {
        "count" => out.int(node.table.len() as i64),
        "info" if args.len() == 2 => write_all_info(node, out),
        "info" => {
            out.array(args.len() - 2);
            for name in &args[2..] {
                match find_view(node, name) {
                    Some(v) => v.write_info(out),
                    None => out.null(),
                }
            }
        }
        "docs" => {
            let views: Vec<CmdView> = if args.len() == 2 {
                node.table.iter().map(|(_, d)| CmdView::of(d)).collect()
            } else {
                args[2..].iter().filter_map(|n| find_view(node, n)).collect()
            };
            out.map(views.len());
            for v in &views {
                out.bulk(v.name.as_bytes());
                v.write_docs(out, None);
            }
        }
        "list" => command_list(node, args, out)?,
        "getkeys" => command_getkeys(node, &args[2..], false, out)?,
        "getkeysandflags" => command_getkeys(node, &args[2..], true, out)?,
        _ => help(out, COMMAND_HELP),
    }
    Ok(())
}

fn command_list(node: &Node, args: &[&[u8]], out: &mut Reply) -> CmdResult {
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
    for (_, def) in node.table.iter() {
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

/// COMMAND GETKEYS and GETKEYSANDFLAGS: the keys a full command line refers
/// to (with their key-spec flags), as Redis's `getKeysSubcommandImpl`.
fn command_getkeys(node: &Node, cmd: &[&[u8]], with_flags: bool, out: &mut Reply) -> CmdResult {
    const INVALID: &str = "ERR Invalid command specified";
    // A container with a subcommand is that subcommand (MEMORY USAGE has a key, MEMORY STATS none).
    let resolved = node.table.resolve(cmd, usize::MAX).ok_or(CmdError::from(INVALID))?;
    if resolved.unknown_sub() {
        return Err(INVALID.into());
    }
    let name = resolved.full_name();
    if !super::key_specs::has_keys(name) {
        return Err("ERR The command has no key arguments".into());
    }
    if resolved.arity_error().is_some() {
        return Err("ERR Invalid number of arguments specified for command".into());
    }
    let keys = super::key_specs::keys_and_flags(name, cmd);
    if keys.is_empty() && !super::key_specs::no_mandatory_keys(name) {
        return Err("ERR Invalid arguments specified for command".into());
    }
    out.array(keys.len());
    for &(pos, key_flags) in &keys {
        if !with_flags {
            out.bulk(cmd[pos]);
            continue;
        }
        out.array(2);
        out.bulk(cmd[pos]);
        let names = super::key_specs::flags::NAMES;
        let set: SmallVec<[&str; 4]> =
            names.iter().enumerate().filter(|(i, _)| key_flags & (1 << i) != 0).map(|(_, n)| *n).collect();
        out.set(set.len());
        for n in set {
            out.simple(n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def_of(name: &str) -> &'static CommandDef {
        crate::commands::all_commands().into_iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn every_supported_subcommand_has_metadata() {
        let containers: [(&str, &[&str]); 7] = [
            ("acl", def_of("acl").subcommands),
            ("slowlog", def_of("slowlog").subcommands),
            ("latency", def_of("latency").subcommands),
            ("command", COMMAND_SUBS),
            ("config", def_of("config").subcommands),
            ("memory", def_of("memory").subcommands),
            ("client", def_of("client").subcommands),
        ];
        for (container, subs) in containers {
            for s in subs {
                assert!(sub_def(&format!("{container}|{s}")).is_some(), "{container}|{s}");
            }
        }
    }

    #[test]
    fn categories_and_flags_follow_redis_rules() {
        let def = CommandDef::new("get", 2, flags::READONLY | flags::FAST, Keys::Range(1, 1, 1), command)
            .acl("@string @fast @read");
        let v = CmdView::of(&def);
        assert_eq!(v.categories().as_slice(), ["read", "string", "fast"]);
        assert_eq!(v.flag_names().as_slice(), ["readonly", "fast"]);
        let def = CommandDef::new("flushall", -1, flags::WRITE, Keys::All, command).acl("@keyspace @dangerous");
        assert_eq!(CmdView::of(&def).categories().as_slice(), ["keyspace", "write", "slow", "dangerous"]);
        let shutdown = def_of("shutdown");
        assert_eq!(
            CmdView::of(shutdown).flag_names().as_slice(),
            ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"]
        );
    }
}
