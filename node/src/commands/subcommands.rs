//! Redis 7.0's metadata of container subcommands (CLIENT LIST, CONFIG GET,
//! ...): arity, flags, key range and ACL categories. Data only: the command
//! table reads it once at start-up, COMMAND INFO / DOCS report it.

use super::flags;

pub(super) const LS: u32 = flags::LOADING | flags::STALE;
pub(super) const NLS: u32 = flags::NOSCRIPT | LS;

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
    sub("acl|cat", -2, NLS, "@slow"),
    sub("acl|deluser", -3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|dryrun", -4, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|genpass", -2, NLS, "@slow"),
    sub("acl|getuser", 3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|help", 2, LS, "@slow"),
    sub("acl|list", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|load", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|log", -2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|save", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|setuser", -3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|users", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("acl|whoami", 2, NLS, "@slow"),
    sub("client|caching", 3, NLS, "@slow @connection"),
    sub("client|getname", 2, NLS, "@slow @connection"),
    sub("client|getredir", 2, NLS, "@slow @connection"),
    sub("client|help", 2, LS, "@slow @connection"),
    sub("client|id", 2, NLS, "@slow @connection"),
    sub("client|info", 2, NLS, "@slow @connection"),
    sub("client|kill", -3, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|list", -2, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|no-evict", 3, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|no-touch", 3, NLS, "@slow @connection"),
    sub("client|pause", -3, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|reply", 3, NLS, "@slow @connection"),
    sub("client|setinfo", 4, NLS, "@slow @connection"),
    sub("client|setname", 3, NLS, "@slow @connection"),
    sub("client|tracking", -3, NLS, "@slow @connection"),
    sub("client|unblock", -3, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|unpause", 2, ADMIN_NLS, "@admin @slow @dangerous @connection"),
    sub("client|trackinginfo", 2, NLS, "@slow @connection"),
    sub("cluster|count-failure-reports", 3, flags::ADMIN | flags::STALE, "@admin @slow @dangerous"),
    sub("cluster|countkeysinslot", 3, flags::STALE, "@slow"),
    sub("cluster|getkeysinslot", 4, flags::STALE, "@slow"),
    sub("cluster|help", 2, LS, "@slow"),
    sub("cluster|info", 2, flags::STALE, "@slow"),
    sub("cluster|keyslot", 3, flags::STALE, "@slow"),
    sub("cluster|links", 2, flags::STALE, "@slow"),
    sub("cluster|myid", 2, flags::STALE, "@slow"),
    sub("cluster|nodes", 2, flags::STALE, "@slow"),
    sub("cluster|replicas", 3, flags::ADMIN | flags::STALE, "@admin @slow @dangerous"),
    sub("cluster|shards", 2, flags::STALE, "@slow"),
    sub("cluster|slaves", 3, flags::ADMIN | flags::STALE, "@admin @slow @dangerous"),
    sub("cluster|slot-stats", -4, flags::STALE, "@slow"),
    sub("cluster|slots", 2, flags::STALE, "@slow"),
    sub("command|count", 2, LS, "@slow @connection"),
    sub("command|docs", -2, LS, "@slow @connection"),
    sub("command|getkeys", -4, LS, "@slow @connection"),
    sub("command|getkeysandflags", -4, LS, "@slow @connection"),
    sub("command|help", 2, LS, "@slow @connection"),
    sub("command|info", -2, LS, "@slow @connection"),
    sub("command|list", -2, LS, "@slow @connection"),
    sub("config|get", -3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("config|help", 2, LS, "@slow"),
    sub("config|resetstat", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("config|rewrite", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("config|set", -4, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("function|delete", 3, flags::WRITE | flags::NOSCRIPT, "@write @slow @scripting"),
    sub("function|dump", 2, flags::NOSCRIPT, "@slow @scripting"),
    sub("function|flush", -2, flags::WRITE | flags::NOSCRIPT, "@write @slow @scripting"),
    sub("function|help", 2, LS, "@slow @scripting"),
    sub("function|kill", 2, flags::NOSCRIPT | flags::ALLOW_BUSY, "@slow @scripting"),
    sub("function|list", -2, flags::NOSCRIPT, "@slow @scripting"),
    sub("function|load", -3, flags::WRITE | flags::DENYOOM | flags::NOSCRIPT, "@write @slow @scripting"),
    sub("function|restore", -3, flags::WRITE | flags::DENYOOM | flags::NOSCRIPT, "@write @slow @scripting"),
    sub("function|stats", 2, flags::NOSCRIPT | flags::ALLOW_BUSY, "@slow @scripting"),
    sub("latency|doctor", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("latency|graph", 3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("latency|help", 2, LS, "@slow"),
    sub("latency|histogram", -2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("latency|history", 3, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("latency|latest", 2, ADMIN_NLS, "@admin @slow @dangerous"),
    sub("latency|reset", -2, ADMIN_NLS, "@admin @slow @dangerous"),
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
    sub("script|exists", -3, flags::NOSCRIPT, "@slow @scripting"),
    sub("script|flush", -2, flags::NOSCRIPT, "@slow @scripting"),
    sub("script|help", 2, LS, "@slow @scripting"),
    sub("script|kill", 2, flags::NOSCRIPT | flags::ALLOW_BUSY, "@slow @scripting"),
    sub("script|load", 3, flags::NOSCRIPT | flags::STALE, "@slow @scripting"),
    sub("slowlog|get", -2, flags::ADMIN | LS, "@admin @slow @dangerous"),
    sub("slowlog|help", 2, LS, "@slow"),
    sub("slowlog|len", 2, flags::ADMIN | LS, "@admin @slow @dangerous"),
    sub("slowlog|reset", 2, flags::ADMIN | LS, "@admin @slow @dangerous"),
    keyed_sub("xgroup|create", -5, flags::WRITE | flags::DENYOOM, "@write @stream @slow"),
    keyed_sub("xgroup|createconsumer", 5, flags::WRITE | flags::DENYOOM, "@write @stream @slow"),
    keyed_sub("xgroup|delconsumer", 5, flags::WRITE, "@write @stream @slow"),
    keyed_sub("xgroup|destroy", 4, flags::WRITE, "@write @stream @slow"),
    sub("xgroup|help", 2, LS, "@stream @slow"),
    keyed_sub("xgroup|setid", -5, flags::WRITE, "@write @stream @slow"),
    keyed_sub("xinfo|consumers", 4, flags::READONLY, "@read @stream @slow"),
    keyed_sub("xinfo|groups", 3, flags::READONLY, "@read @stream @slow"),
    sub("xinfo|help", 2, LS, "@stream @slow"),
    keyed_sub("xinfo|stream", -3, flags::READONLY, "@read @stream @slow"),
];

/// The metadata of `container|sub`, lower case (a linear search: for
/// start-up and COMMAND, never per request).
pub fn sub_def(full_name: &str) -> Option<&'static SubDef> {
    SUBCOMMANDS.iter().find(|s| s.name == full_name)
}
