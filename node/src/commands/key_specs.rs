//! Redis 7.0's key specifications and how COMMAND GETKEYS and GETKEYSANDFLAGS
//! read keys and their flags from them (`getKeysFromCommandWithSpecs`): the
//! specs first, and the few commands whose specs cannot say it all (variable
//! flags, incomplete or unknown specs) through their own rules, as Redis's
//! `getkeys_proc`s do. The specs themselves are generated from redis-server
//! (`key_specs_table.rs`).

use crate::base::eq_ic;
use smallvec::SmallVec;

/// Key-spec flags, as COMMAND GETKEYSANDFLAGS names them, in Redis's order.
pub mod flags {
    pub const RO: u16 = 1;
    pub const RW: u16 = 1 << 1;
    pub const OW: u16 = 1 << 2;
    pub const RM: u16 = 1 << 3;
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    pub const NOT_KEY: u16 = 1 << 8;
    pub const INCOMPLETE: u16 = 1 << 9;
    pub const VARIABLE_FLAGS: u16 = 1 << 10;
    pub const NAMES: [&str; 11] =
        ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key", "incomplete", "variable_flags"];
}

/// Where the search for a spec's keys starts.
#[derive(Debug, Clone, Copy)]
pub enum Begin {
    Index(i32),
    /// After this keyword, searched from `startfrom` (negative: from the end, backwards).
    Keyword(&'static str, i32),
    Unknown,
}

/// Which arguments from there are keys.
#[derive(Debug, Clone, Copy)]
pub enum Find {
    Range { last: i32, step: i32, limit: i32 },
    Keynum { idx: i32, first: i32, step: i32 },
    Unknown,
}

#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
}

/// The key specs of a command or `container|sub` (lower case); none when
/// Redis says it has no keys.
pub fn specs_of(name: &str) -> &'static [KeySpec] {
    let table = super::key_specs_table::KEY_SPECS;
    table.binary_search_by(|(n, _)| (*n).cmp(name)).map_or(&[], |i| table[i].1)
}

/// Redis's `doesCommandHaveKeys`: some spec names real keys.
pub fn has_keys(name: &str) -> bool {
    specs_of(name).iter().any(|s| s.flags & flags::NOT_KEY == 0)
}

/// Commands whose keys may all be absent (EVAL with 0 keys): GETKEYS
/// answers an empty list instead of an error.
pub fn no_mandatory_keys(name: &str) -> bool {
    matches!(name, "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro")
}

pub type KeysAndFlags = SmallVec<[(usize, u16); 8]>;

/// Keys (argument positions) of `args` (the command line, name first) and
/// their flags, as `getKeysFromCommandWithSpecs`; empty when the arguments
/// do not hold the keys the specs expect.
pub fn keys_and_flags(name: &str, args: &[&[u8]]) -> KeysAndFlags {
    let specs = specs_of(name);
    let variable = specs.iter().any(|s| s.flags & flags::VARIABLE_FLAGS != 0);
    if !variable {
        if let Some(keys) = from_specs(specs, args) {
            return keys;
        }
    }
    own_rules(name, args)
}

/// Redis's `getKeysUsingKeySpecs`; None for a spec it cannot follow
/// (unknown, incomplete, or arguments out of its bounds).
fn from_specs(specs: &[KeySpec], args: &[&[u8]]) -> Option<KeysAndFlags> {
    let argc = args.len() as i64;
    let mut keys = KeysAndFlags::new();
    for spec in specs.iter().filter(|s| s.flags & flags::NOT_KEY == 0) {
        let mut first: i64 = match spec.begin {
            Begin::Index(i) => i as i64,
            Begin::Keyword(word, from) => {
                let from = from as i64;
                let (start, end) = if from > 0 { (from, argc - 1) } else { (argc + from, 1) };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if eq_ic(args[i as usize], word) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range { last, step, limit } => {
                let last = if last >= 0 {
                    first + last as i64
                } else if limit == 0 {
                    argc + last as i64
                } else {
                    first + ((argc - first) / limit as i64 + last as i64)
                };
                (last, step as i64)
            }
            Find::Keynum { idx, first: first_key, step } => {
                let at = first + idx as i64;
                if idx as i64 >= argc || at >= argc {
                    return None;
                }
                let numkeys = std::str::from_utf8(args[at as usize]).ok()?.parse::<i64>().ok().filter(|&n| n >= 0)?;
                first += first_key as i64;
                (first + numkeys - 1, step as i64)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last && step > 0 {
            keys.push((i as usize, spec.flags));
            i += step;
        }
        if spec.flags & flags::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// The `getkeys_proc`s of the commands whose specs cannot say it all.
fn own_rules(name: &str, args: &[&[u8]]) -> KeysAndFlags {
    use flags::*;
    let mut keys = KeysAndFlags::new();
    match name {
        // SET is a read only with GET.
        "set" => {
            let get = args.iter().skip(3).any(|a| eq_ic(a, "get"));
            keys.push((1, if get { RW | ACCESS | UPDATE } else { OW | UPDATE }));
        }
        // BITFIELD with GETs (and OVERFLOW) only reads.
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < args.len() {
                let rest = args.len() - i - 1;
                let a = args[i];
                if eq_ic(a, "get") && rest >= 2 {
                    i += 2;
                } else if (eq_ic(a, "set") || eq_ic(a, "incrby")) && rest >= 3 {
                    readonly = false;
                    break;
                } else if eq_ic(a, "overflow") && rest >= 1 {
                    i += 1;
                } else {
                    readonly = false;
                    break;
                }
                i += 1;
            }
            keys.push((1, if readonly { RO | ACCESS } else { RW | ACCESS | UPDATE }));
        }
        "sort_ro" => keys.push((1, RO | ACCESS)),
        // The last STORE names the destination; LIMIT, GET and BY arguments are skipped.
        "sort" => {
            keys.push((1, RO | ACCESS));
            let mut store = None;
            let mut i = 2;
            while i < args.len() {
                let a = args[i];
                if eq_ic(a, "limit") {
                    i += 2;
                } else if eq_ic(a, "get") || eq_ic(a, "by") {
                    i += 1;
                } else if eq_ic(a, "store") && i + 1 < args.len() {
                    store = Some(i + 1);
                }
                i += 1;
            }
            if let Some(pos) = store {
                keys.push((pos, OW | UPDATE));
            }
        }
        // The key, or with KEYS (and an empty key) every argument after it.
        "migrate" => {
            let (mut first, mut num) = (3, 1);
            let mut i = 6;
            while i < args.len() {
                let a = args[i];
                if eq_ic(a, "auth2") {
                    i += 2;
                } else if eq_ic(a, "auth") {
                    i += 1;
                } else if eq_ic(a, "keys") {
                    if !args[3].is_empty() {
                        return keys;
                    }
                    first = i + 1;
                    num = args.len() - first;
                    break;
                }
                i += 1;
            }
            keys.extend((first..first + num).filter(|&p| p < args.len()).map(|p| (p, RW | ACCESS | DELETE)));
        }
        _ => {}
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::flags::*;
    use super::*;

    fn keys(name: &str, line: &str) -> Vec<(usize, u16)> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        keys_and_flags(name, &args).into_vec()
    }

    #[test]
    fn table_is_sorted_for_binary_search() {
        let t = crate::commands::key_specs_table::KEY_SPECS;
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(has_keys("get") && has_keys("memory|usage") && !has_keys("ping") && !has_keys("spublish"));
    }

    #[test]
    fn specs_and_own_rules_give_redis_flags() {
        assert_eq!(keys("set", "set k v"), [(1, OW | UPDATE)]);
        assert_eq!(keys("set", "set k v get"), [(1, RW | ACCESS | UPDATE)]);
        assert_eq!(keys("lmove", "lmove a b left right"), [(1, RW | ACCESS | DELETE), (2, RW | INSERT)]);
        assert_eq!(keys("sort", "sort a by x store b"), [(1, RO | ACCESS), (5, OW | UPDATE)]);
        assert_eq!(keys("xread", "xread count 2 streams a b 0 0"), [(4, RO | ACCESS), (5, RO | ACCESS)]);
        assert_eq!(keys("eval", "eval s 2 a b"), [(3, RW | ACCESS | UPDATE), (4, RW | ACCESS | UPDATE)]);
        assert!(keys("eval", "eval s 5 a b").is_empty());
        assert!(keys("zunionstore", "zunionstore d -1 a").is_empty());
        assert_eq!(keys("bitfield", "bitfield k get u8 0"), [(1, RO | ACCESS)]);
        assert_eq!(
            keys("migrate", "migrate h p  0 10 keys a b"),
            [(7, RW | ACCESS | DELETE), (8, RW | ACCESS | DELETE)]
        );
    }
}
