//! The command table, and the first stage of the pipeline: `resolve`, which
//! finds a request's command, its subcommand and (once, on first use) its key
//! positions, so no later stage looks anything up again or builds a name.

use super::subcommands::sub_def;
use super::{CommandDef, Keys, err};
use smallvec::SmallVec;
use std::cell::OnceCell;
use std::collections::HashMap;

/// A container's subcommand as the pipeline needs it, built once at start-up.
#[derive(Clone, Copy, Debug)]
pub struct SubEntry {
    /// Lower case, as the container declares it (`list`).
    pub name: &'static str,
    /// `client|list`: INFO commandstats', ACL's and errors' name for it.
    pub full: &'static str,
    /// Its statistics slot, which is also its ACL catalog id.
    pub slot: usize,
    /// Redis's arity, when the metadata gives one (else the handler checks).
    pub arity: Option<i32>,
    /// Redis's flags for it (WRITE, DENYOOM, ADMIN, NOSCRIPT, ALLOW_BUSY, ...).
    pub flags: u32,
}

/// Every command, indexed by lower-case name.
pub struct CommandTable {
    defs: Vec<&'static CommandDef>,
    by_name: HashMap<&'static [u8], usize, foldhash::fast::FixedState>,
    /// Statistics slots, as INFO commandstats names them: one per command
    /// (slot = table index), then one per subcommand (`container|sub`).
    slot_names: Vec<&'static str>,
    /// Per command, its subcommands.
    subs: Vec<Vec<SubEntry>>,
}

impl CommandTable {
    /// The table of `defs` (every family's `COMMANDS`, `super::all_commands`).
    pub fn new(defs: Vec<&'static CommandDef>) -> Self {
        let mut by_name = HashMap::with_capacity_and_hasher(defs.len() * 2, Default::default());
        for (i, d) in defs.iter().enumerate() {
            let prev = by_name.insert(d.name.as_bytes(), i);
            assert!(prev.is_none(), "command {} registered twice", d.name);
        }
        let mut slot_names: Vec<&'static str> = defs.iter().map(|d| d.name).collect();
        let mut subs = vec![Vec::new(); defs.len()];
        for (i, d) in defs.iter().enumerate() {
            for &name in d.subcommands {
                let full = format!("{}|{name}", d.name);
                // The metadata's name when there is one; else built once, at start-up.
                let meta = sub_def(&full);
                let full = meta.map_or_else(|| &*full.leak(), |s| s.name);
                subs[i].push(SubEntry {
                    name,
                    full,
                    slot: slot_names.len(),
                    arity: meta.map(|s| s.arity),
                    flags: meta.map_or(0, |s| s.flags),
                });
                slot_names.push(full);
            }
        }
        CommandTable { defs, by_name, slot_names, subs }
    }

    /// How many statistics slots commands and subcommands take.
    pub fn stat_slots(&self) -> usize {
        self.slot_names.len()
    }

    /// `get`, or `client|list` for a subcommand's slot.
    pub fn slot_name(&self, slot: usize) -> &'static str {
        self.slot_names[slot]
    }

    /// The subcommand `given` of command `idx`, case-insensitively.
    fn sub_of(&self, idx: usize, given: &[u8]) -> Option<&SubEntry> {
        self.subs[idx].iter().find(|s| given.eq_ignore_ascii_case(s.name.as_bytes()))
    }

    /// The slots of a command given by name as `cmd` or `container|sub`
    /// (LATENCY HISTOGRAM): its own, then its subcommands'.
    pub fn slots_named(&self, name: &[u8]) -> Vec<usize> {
        let (cmd, sub) = match name.iter().position(|&b| b == b'|') {
            Some(i) => (&name[..i], Some(&name[i + 1..])),
            None => (name, None),
        };
        let Some(idx) = self.lookup(cmd) else { return Vec::new() };
        match sub {
            None => std::iter::once(idx).chain(self.subs[idx].iter().map(|s| s.slot)).collect(),
            Some(sub) => self.sub_of(idx, sub).map(|s| s.slot).into_iter().collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.defs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    pub fn get(&self, idx: usize) -> &'static CommandDef {
        self.defs[idx]
    }

    pub fn iter(&self) -> impl Iterator<Item = (usize, &'static CommandDef)> + '_ {
        self.defs.iter().copied().enumerate()
    }

    /// Case-insensitive lookup without allocating.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        for (d, s) in buf.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        self.by_name.get(&buf[..name.len()]).copied()
    }

    /// Resolves a request: None for an unknown command. `hint` is a table
    /// index the caller expects (a connection's last command): checked
    /// first, it spares the hash lookup of a repeated command.
    #[inline]
    pub fn resolve<'a>(&self, args: &'a [&'a [u8]], hint: usize) -> Option<Resolved<'a>> {
        let cached = hint < self.defs.len() && self.defs[hint].name.as_bytes().eq_ignore_ascii_case(args[0]);
        let idx = if cached { hint } else { self.lookup(args[0])? };
        Some(self.resolved(idx, args))
    }

    /// The request `args` of command `idx` (already looked up: a queued
    /// command, a blocked one run again).
    #[inline]
    pub fn resolved<'a>(&self, idx: usize, args: &'a [&'a [u8]]) -> Resolved<'a> {
        let def = self.defs[idx];
        let sub = if self.subs[idx].is_empty() || args.len() < 2 {
            SubLookup::NotContainer
        } else {
            match self.sub_of(idx, args[1]) {
                Some(s) => SubLookup::Known(*s),
                None => SubLookup::Unknown,
            }
        };
        Resolved { idx, def, sub, args, keys: OnceCell::new() }
    }
}

/// What `args[1]` is for the command.
#[derive(Clone, Copy, Debug)]
enum SubLookup {
    /// Not a container, or a container called without a subcommand.
    NotContainer,
    Known(SubEntry),
    /// A container's subcommand it does not have (its handler answers).
    Unknown,
}

/// A request resolved against the table: what every later stage reads.
pub struct Resolved<'a> {
    /// Its command-table index.
    pub idx: usize,
    pub def: &'static CommandDef,
    sub: SubLookup,
    pub args: &'a [&'a [u8]],
    /// Key positions, computed on first use (ACL, locking, the disk tier's
    /// pending check and CLIENT TRACKING share them).
    keys: OnceCell<SmallVec<[usize; 8]>>,
}

impl<'a> Resolved<'a> {
    /// The subcommand named, when the command has it.
    #[inline]
    pub fn sub(&self) -> Option<&SubEntry> {
        match &self.sub {
            SubLookup::Known(s) => Some(s),
            _ => None,
        }
    }

    /// The command's flags with its subcommand's.
    #[inline]
    pub fn flags(&self) -> u32 {
        self.def.flags | self.sub().map_or(0, |s| s.flags)
    }

    #[inline]
    pub fn has(&self, flag: u32) -> bool {
        self.flags() & flag != 0
    }

    /// The statistics slot of the call: the subcommand's for a container
    /// given one it has, None for one it has not (Redis counts no command
    /// then), else the command's own.
    #[inline]
    pub fn stat_slot(&self) -> Option<usize> {
        match &self.sub {
            SubLookup::NotContainer => Some(self.idx),
            SubLookup::Known(s) => Some(s.slot),
            SubLookup::Unknown => None,
        }
    }

    /// The name Redis reports for the request: `container|sub` for a known
    /// subcommand, else the command's own.
    pub fn full_name(&self) -> &'static str {
        self.sub().map_or(self.def.name, |s| s.full)
    }

    /// True when `args[1]` names a subcommand the container lacks.
    pub fn unknown_sub(&self) -> bool {
        matches!(self.sub, SubLookup::Unknown)
    }

    /// The arity error of the command or of its subcommand, if any.
    pub fn arity_error(&self) -> Option<ArityError> {
        if !arity_ok(self.def.arity, self.args.len()) {
            return Some(ArityError::Command);
        }
        let sub = self.sub()?;
        (!arity_ok(sub.arity?, self.args.len())).then_some(ArityError::Subcommand)
    }

    /// Redis's arity error for the request, naming what it names.
    pub fn arity_message(&self, e: ArityError) -> String {
        match e {
            ArityError::Command => err::arity(self.def.name),
            ArityError::Subcommand => err::arity(self.full_name()),
        }
    }

    /// Argument positions of the request's keys (none for `Keys::All`).
    #[inline]
    pub fn key_positions(&self) -> &[usize] {
        self.keys.get_or_init(|| self.def.key_positions(self.args))
    }

    /// The request's keys.
    pub fn keys(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.key_positions().iter().map(|&i| self.args[i])
    }

    /// The one key of a single-key command, without building positions
    /// (most commands name one key).
    #[inline]
    pub fn single_key(&self) -> Option<&'a [u8]> {
        match self.def.keys {
            Keys::Range(first, last, step) if single_key(first, last, step, self.args.len()) => {
                Some(self.args[first as usize])
            }
            _ => None,
        }
    }
}

/// Which arity a request breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArityError {
    Command,
    Subcommand,
}

/// True when the arity allows `n` arguments.
#[inline]
pub fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 { n == arity as usize } else { n >= (-arity) as usize }
}

/// True when a key range names exactly one key, at `first`, among `n` arguments.
#[inline]
fn single_key(first: i32, last: i32, step: i32, n: usize) -> bool {
    let last = if last < 0 { n as i32 + last } else { last };
    step > 0 && first > 0 && (first as usize) < n && last == first
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> CommandTable {
        CommandTable::new(crate::commands::all_commands())
    }

    /// The single-key locking shortcut must pick exactly what the general
    /// key-position walk would, for every ranged command and argument count.
    #[test]
    fn single_key_shortcut_matches_key_positions() {
        let table = table();
        let args_pool: Vec<&[u8]> = vec![b"cmd", b"a", b"b", b"c", b"d", b"e", b"f"];
        let mut shortcut_used = 0;
        for (_, def) in table.iter() {
            let Keys::Range(first, last, step) = def.keys else { continue };
            for n in 1..=args_pool.len() {
                let args = &args_pool[..n];
                if single_key(first, last, step, n) {
                    shortcut_used += 1;
                    assert_eq!(def.key_positions(args).as_slice(), &[first as usize], "{} with {n} args", def.name);
                }
            }
        }
        assert!(shortcut_used > 0);
    }

    #[test]
    fn no_command_name_is_too_long_to_look_up() {
        // The per-client hint compares names directly; `lookup` only sees
        // names of up to 32 bytes. Both must agree on every command.
        let table = table();
        for (i, def) in table.iter() {
            assert_eq!(table.lookup(def.name.to_ascii_uppercase().as_bytes()), Some(i), "{}", def.name);
        }
    }

    #[test]
    fn resolve_finds_subcommands_case_insensitively_and_counts_unknown_ones_nowhere() {
        let table = table();
        let args: Vec<&[u8]> = vec![b"CLIENT", b"LiSt"];
        let r = table.resolve(&args, usize::MAX).expect("client");
        let sub = r.sub().expect("client|list");
        assert_eq!(sub.full, "client|list");
        assert_eq!(r.stat_slot(), Some(sub.slot));
        assert_eq!(table.slot_name(sub.slot), "client|list");
        assert!(r.has(crate::commands::flags::ADMIN), "client|list is an admin subcommand");
        let args: Vec<&[u8]> = vec![b"client", b"nosuch"];
        let r = table.resolve(&args, usize::MAX).expect("client");
        assert!(r.unknown_sub() && r.stat_slot().is_none());
        let args: Vec<&[u8]> = vec![b"client"];
        assert_eq!(table.resolve(&args, usize::MAX).expect("client").stat_slot(), table.lookup(b"client"));
        let args: Vec<&[u8]> = vec![b"nosuchcommand"];
        assert!(table.resolve(&args, 0).is_none());
    }

    #[test]
    fn arity_errors_name_the_command_or_the_subcommand() {
        let table = table();
        let args: Vec<&[u8]> = vec![b"get"];
        let r = table.resolve(&args, usize::MAX).unwrap();
        let e = r.arity_error().expect("get needs a key");
        assert_eq!(r.arity_message(e), "ERR wrong number of arguments for 'get' command");
        let args: Vec<&[u8]> = vec![b"client", b"setname"];
        let r = table.resolve(&args, usize::MAX).unwrap();
        let e = r.arity_error().expect("client setname needs a name");
        assert_eq!(r.arity_message(e), "ERR wrong number of arguments for 'client|setname' command");
    }

    #[test]
    fn key_positions_are_computed_once_and_agree_with_the_definition() {
        let table = table();
        let args: Vec<&[u8]> = vec![b"mset", b"a", b"1", b"b", b"2"];
        let r = table.resolve(&args, usize::MAX).unwrap();
        assert_eq!(r.key_positions(), &[1, 3]);
        assert!(std::ptr::eq(r.key_positions(), r.key_positions()), "cached, not rebuilt");
        assert_eq!(r.keys().collect::<Vec<_>>(), vec![&b"a"[..], &b"b"[..]]);
        assert_eq!(r.single_key(), None);
        let args: Vec<&[u8]> = vec![b"get", b"k"];
        assert_eq!(table.resolve(&args, usize::MAX).unwrap().single_key(), Some(&b"k"[..]));
    }

    /// The ACL catalog numbers subcommands as the table's statistics slots,
    /// so a resolved request's catalog id needs no lookup (`acl::catalog_id`).
    #[test]
    fn subcommand_slots_are_their_acl_catalog_ids() {
        let table = table();
        let catalog = crate::commands::command_meta::acl_catalog(&table);
        let mut checked = 0;
        for (i, def) in table.iter() {
            assert_eq!(catalog.lookup(def.name.as_bytes()), Some(i), "{}", def.name);
            for s in &table.subs[i] {
                assert_eq!(catalog.lookup(s.full.as_bytes()), Some(s.slot), "{}", s.full);
                checked += 1;
            }
        }
        assert!(checked > 50, "{checked} subcommands");
    }

    /// Every subcommand Redis's metadata describes is one its container
    /// declares: resolving through the table finds every flag a lookup by
    /// `container|sub` would (ALLOW_BUSY, ADMIN, NOSCRIPT, ...).
    #[test]
    fn every_described_subcommand_is_declared_by_its_container() {
        let table = table();
        for meta in crate::commands::subcommands::SUBCOMMANDS {
            let (container, sub) = meta.name.split_once('|').expect("container|sub");
            let idx = table.lookup(container.as_bytes()).unwrap_or_else(|| panic!("{container} is no command"));
            let entry = table.sub_of(idx, sub.as_bytes()).unwrap_or_else(|| panic!("{} undeclared", meta.name));
            assert_eq!((entry.flags, entry.arity, entry.full), (meta.flags, Some(meta.arity), meta.name));
        }
    }
}
