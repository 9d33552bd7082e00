//! ACL users as Redis 7.0 has them: the ACL SETUSER rule grammar, the
//! descriptions ACL LIST and GETUSER show, permission checks, and the
//! table every worker reads.
//!
//! The table is an immutable snapshot behind an `Arc`, replaced as a whole
//! on every change and tagged with a generation number: a client keeps its
//! user's `Arc` and re-reads the table only when the generation moved, so a
//! command costs one relaxed atomic load, and a user with every permission
//! (the default user) skips the checks entirely.

use crate::base::glob_match;
use crate::base::sha256::sha256_hex;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

/// ACL categories in Redis's order (bit i of a category mask is entry i).
pub const CATEGORIES: &[&str] = &[
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

/// The bit of a category, by case-insensitive name.
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(name)).map(|i| 1 << i)
}

/// One command or subcommand the rules can name.
pub struct CatalogEntry {
    /// Lower-case full name: `get`, `config|get`.
    pub name: String,
    pub parent: Option<usize>,
    pub categories: u32,
}

/// Every command and subcommand, numbered: a user's permissions are a bit
/// per entry. Built once by the command layer.
pub struct Catalog {
    pub entries: Vec<CatalogEntry>,
    pub children: Vec<Vec<usize>>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    pub fn new(entries: Vec<CatalogEntry>) -> Self {
        let mut children = vec![Vec::new(); entries.len()];
        let mut by_name = HashMap::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            if let Some(p) = e.parent {
                children[p].push(i);
            }
            by_name.insert(e.name.clone(), i);
        }
        Catalog { entries, children, by_name }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Redis's `ACLLookupCommand`: `name` or `container|sub`, any case.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        let mut parts = lower.split('|');
        let base = parts.next()?;
        match (parts.next(), parts.next()) {
            (None, _) => self.by_name.get(base).copied().filter(|&i| self.entries[i].parent.is_none()),
            (Some(_), None) => self.by_name.get(&lower).copied(),
            _ => None,
        }
    }

    /// Top-level entries followed each by their subcommands.
    fn tree_order(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len())
            .filter(|&i| self.entries[i].parent.is_none())
            .flat_map(move |i| std::iter::once(i).chain(self.children[i].iter().copied()))
    }
}

/// Key pattern permissions (`%R~`, `%W~`, `~` = both).
pub const KEY_READ: u8 = 1;
pub const KEY_WRITE: u8 = 2;
pub const KEY_ALL: u8 = KEY_READ | KEY_WRITE;

/// Why a rule was refused: Redis's errno, as its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any \
                 effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have \
                 any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Redis's `ACLStringHasSpaces`: spaces or NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0)
}

/// A set of permissions: the root one of a user, or a `(...)` selector.
#[derive(Clone, Debug)]
pub struct Selector {
    root: bool,
    /// Every command, including those of the future (Redis's flag; any
    /// removal clears it).
    allcommands: bool,
    /// Redis's reserved "future commands" bit: only `+@all` sets it, only
    /// `-@all` clears it. Decides whether a description starts from +@all.
    future: bool,
    bits: Vec<u64>,
    /// Allowed first arguments of otherwise denied commands (`+select|0`).
    firstargs: BTreeMap<usize, Vec<String>>,
    allkeys: bool,
    patterns: Vec<(Vec<u8>, u8)>,
    allchannels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(root: bool, n: usize, allchannels: bool) -> Self {
        Selector {
            root,
            allcommands: false,
            future: false,
            bits: vec![0; n.div_ceil(64)],
            firstargs: BTreeMap::new(),
            allkeys: false,
            patterns: Vec::new(),
            allchannels,
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits.get(id / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.bits.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                self.allcommands = false;
            }
        }
    }

    /// Redis's `ACLChangeSelectorPerm`: the command and all its subcommands.
    fn change_perm(&mut self, cat: &Catalog, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        for &sub in &cat.children[id] {
            self.set_bit(sub, allow);
        }
    }

    fn set_category(&mut self, cat: &Catalog, bit: u32, allow: bool) {
        for id in cat.tree_order() {
            if cat.entries[id].categories & bit != 0 {
                self.change_perm(cat, id, allow);
            }
        }
    }

    fn set_all(&mut self, allow: bool) {
        self.allcommands = allow;
        self.future = allow;
        self.firstargs.clear();
        let fill = if allow { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
    }

    /// Redis's `ACLSetSelector`: one rule about commands, keys or channels.
    fn apply(&mut self, cat: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        // Only a quoted "" inside a selector gets here empty.
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.patterns.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut flags = 0;
            let mut offset = 1;
            if op[0] == b'%' {
                while offset < op.len() {
                    let c = op[offset];
                    if c.eq_ignore_ascii_case(&b'r') && flags & KEY_READ == 0 {
                        flags |= KEY_READ;
                    } else if c.eq_ignore_ascii_case(&b'w') && flags & KEY_WRITE == 0 {
                        flags |= KEY_WRITE;
                    } else if c == b'~' {
                        offset += 1;
                        break;
                    } else {
                        return Err(RuleError::Syntax);
                    }
                    offset += 1;
                }
                if flags == 0 {
                    return Err(RuleError::Syntax);
                }
            } else {
                flags = KEY_ALL;
            }
            let pattern = &op[offset.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if pattern == b"*" && flags == KEY_ALL {
                self.allkeys = true;
                self.patterns.clear();
            } else if let Some(p) = self.patterns.iter_mut().find(|(p, _)| p == pattern) {
                p.1 |= flags;
            } else {
                self.patterns.push((pattern.to_vec(), flags));
            }
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = cat.lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(cat, id, true);
                }
                Some(bar) => {
                    let id = cat.lookup(&name[..bar]).ok_or(RuleError::UnknownCommand)?;
                    if cat.entries[id].parent.is_some() {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !cat.children[id].is_empty() {
                        let sub_id = cat.lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(cat, sub_id, true);
                    } else {
                        let arg = String::from_utf8_lossy(sub).to_ascii_lowercase();
                        let list = self.firstargs.entry(id).or_default();
                        if !list.contains(&arg) {
                            list.push(arg);
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = cat.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(cat, id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let bit = category_bit(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.set_category(cat, bit, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Redis 7.0's `ACLDescribeSelectorCommandRules`: +@all or -@all, then
    /// the categories that fit best, then single commands to make up the
    /// difference, then allowed first arguments.
    fn describe_commands(&self, cat: &Catalog) -> String {
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(false, cat.len(), false);
        fake.set_all(!additive);
        // What is left to explain: categories are applied to it inverted.
        let mut temp = self.clone();
        let mut applied = [false; 32];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (u64::MAX, 0);
            for (j, name) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0u64, 0u64);
                for id in cat.tree_order() {
                    if cat.entries[id].categories & (1 << j) != 0 {
                        if temp.bit(id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some((j, *name));
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some((j, name)) = best else { break };
            fake.set_category(cat, 1 << j, additive);
            temp.set_category(cat, 1 << j, !additive);
            rules.push(if additive { '+' } else { '-' });
            rules.push('@');
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        for id in cat.entries.iter().enumerate().filter(|(_, e)| e.parent.is_none()).map(|(i, _)| i) {
            self.describe_single(cat, &mut fake, &mut rules, id);
            for &sub in &cat.children[id] {
                self.describe_single(cat, &mut fake, &mut rules, sub);
            }
            if !self.bit(id)
                && let Some(args) = self.firstargs.get(&id)
            {
                for a in args {
                    rules.push('+');
                    rules.push_str(&cat.entries[id].name);
                    rules.push('|');
                    rules.push_str(a);
                    rules.push(' ');
                }
            }
        }
        rules.pop();
        rules
    }

    fn describe_single(&self, cat: &Catalog, fake: &mut Selector, rules: &mut String, id: usize) {
        let mine = self.bit(id);
        if mine != fake.bit(id) {
            rules.push(if mine { '+' } else { '-' });
            rules.push_str(&cat.entries[id].name);
            rules.push(' ');
            fake.change_perm(cat, id, mine);
        }
    }

    /// `~a %R~b`: the key patterns, space separated.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut s = Vec::new();
        for (i, (p, flags)) in self.patterns.iter().enumerate() {
            if i > 0 {
                s.push(b' ');
            }
            push_pattern(&mut s, p, *flags);
        }
        s
    }

    pub fn describe_channels(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut s = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                s.push(b' ');
            }
            s.push(b'&');
            s.extend_from_slice(c);
        }
        s
    }

    /// Redis's `ACLDescribeSelector` (ACL LIST).
    fn describe(&self, cat: &Catalog) -> Vec<u8> {
        let mut s = Vec::new();
        if self.allkeys {
            s.extend_from_slice(b"~* ");
        } else {
            for (p, flags) in &self.patterns {
                push_pattern(&mut s, p, *flags);
                s.push(b' ');
            }
        }
        if self.allchannels {
            s.extend_from_slice(b"&* ");
        } else {
            s.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                s.push(b'&');
                s.extend_from_slice(c);
                s.push(b' ');
            }
        }
        s.extend_from_slice(self.describe_commands(cat).as_bytes());
        s
    }

    pub fn commands_text(&self, cat: &Catalog) -> String {
        self.describe_commands(cat)
    }

    fn check_key(&self, key: &[u8], wanted: u8) -> bool {
        self.allkeys || self.patterns.iter().any(|(p, flags)| flags & wanted == wanted && glob_match(p, key, false))
    }

    /// Redis's `ACLSelectorCheckCmd`.
    fn check(&self, req: &Request<'_>) -> Result<(), Denied> {
        if !self.allcommands && !req.no_auth && !self.bit(req.id) {
            let allowed = req.args.len() > req.firstarg && {
                let arg = req.args[req.firstarg];
                self.firstargs
                    .get(&req.id)
                    .is_some_and(|list| list.iter().any(|a| a.as_bytes().eq_ignore_ascii_case(arg)))
            };
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for &(pos, flags) in req.keys {
                if !self.check_key(req.args[pos], flags) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            for &(pos, is_pattern) in req.channels {
                if !channel_allowed(&self.channels, req.args[pos], is_pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }
}

fn push_pattern(s: &mut Vec<u8>, p: &[u8], flags: u8) {
    match flags {
        KEY_READ => s.extend_from_slice(b"%R~"),
        KEY_WRITE => s.extend_from_slice(b"%W~"),
        _ => s.push(b'~'),
    }
    s.extend_from_slice(p);
}

/// Redis's `ACLCheckChannelAgainstList`: channel patterns (PSUBSCRIBE)
/// must appear literally; channels are matched against the patterns.
pub fn channel_allowed(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| if is_pattern { p == channel } else { glob_match(p, channel, false) })
}

/// A command as the checks see it.
pub struct Request<'a> {
    /// Catalog id (the subcommand's when there is one).
    pub id: usize,
    pub args: &'a [&'a [u8]],
    /// Where a `+cmd|arg` first argument is (1, or 2 for subcommands).
    pub firstarg: usize,
    /// AUTH, HELLO, ...: any user may run them.
    pub no_auth: bool,
    /// Key positions with the access they need (`KEY_READ`/`KEY_WRITE`).
    pub keys: &'a [(usize, u8)],
    /// Channel positions; true for PSUBSCRIBE's patterns.
    pub channels: &'a [(usize, bool)],
}

/// A refusal, with the argument it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// Redis's ranking when no selector allows: command < key < channel,
    /// then the later argument.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(p) => (2, p),
            Denied::Channel(p) => (4, p),
        }
    }
}

/// A user: flags, passwords and selectors (the first is the root one).
#[derive(Clone, Debug)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) / `skip-sanitize-payload` (Some(false)).
    pub sanitize: Option<bool>,
    pub passwords: Vec<String>,
    selectors: Vec<Selector>,
    /// Every command, key and channel: no check needed.
    unrestricted: bool,
}

impl User {
    /// A new user: off, no passwords, no permissions.
    pub fn new(name: &[u8], cat: &Catalog, allchannels_default: bool) -> Self {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, cat.len(), allchannels_default)],
            unrestricted: false,
        }
    }

    /// Redis's default user: `on nopass ~* &* +@all`.
    pub fn new_default(cat: &Catalog) -> Self {
        let mut u = User::new(b"default", cat, false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(cat, op.as_bytes(), false).expect("default rules are valid");
        }
        u
    }

    /// A stand-in with every permission until a client resolves its user.
    pub fn placeholder() -> Arc<User> {
        static P: OnceLock<Arc<User>> = OnceLock::new();
        P.get_or_init(|| {
            let mut s = Selector::new(true, 0, true);
            s.allcommands = true;
            s.future = true;
            s.allkeys = true;
            Arc::new(User {
                name: b"default".to_vec(),
                enabled: true,
                nopass: true,
                sanitize: None,
                passwords: Vec::new(),
                selectors: vec![s],
                unrestricted: true,
            })
        })
        .clone()
    }

    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    fn refresh(&mut self) {
        let r = &self.selectors[0];
        self.unrestricted = r.allcommands && r.allkeys && r.allchannels;
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// The `(...)` selectors.
    pub fn extra_selectors(&self) -> &[Selector] {
        &self.selectors[1..]
    }

    /// Redis's `ACLSetUser`: one (already merged) rule.
    pub fn apply(&mut self, cat: &Catalog, op: &[u8], allchannels_default: bool) -> Result<(), RuleError> {
        let r = self.apply_rule(cat, op, allchannels_default);
        self.refresh();
        r
    }

    fn apply_rule(&mut self, cat: &Catalog, op: &[u8], allchannels_default: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' { sha256_hex(&op[1..]) } else { valid_hash(&op[1..])? };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' { sha256_hex(&op[1..]) } else { valid_hash(&op[1..])? };
            let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(false, cat.len(), allchannels_default);
            // Unbalanced quotes leave the selector empty, as in Redis.
            for rule in split_args(&op[1..op.len() - 1]).unwrap_or_default() {
                s.apply(cat, &rule)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.allkeys = false;
            root.patterns.clear();
            root.allchannels = allchannels_default;
            root.channels.clear();
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.truncate(1);
            self.selectors[0].set_all(false);
        } else {
            self.selectors[0].apply(cat, op)?;
        }
        Ok(())
    }

    /// Redis's `ACLCheckUserCredentials`.
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = sha256_hex(pass);
        self.passwords.iter().any(|p| constant_time_eq(p.as_bytes(), hash.as_bytes()))
    }

    /// Redis's `ACLCheckAllUserCommandPerm`: allowed when any selector allows.
    pub fn check(&self, req: &Request<'_>) -> Result<(), Denied> {
        if self.unrestricted {
            return Ok(());
        }
        let mut worst = Denied::Command;
        for s in &self.selectors {
            match s.check(req) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// Flag names, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        match self.sanitize {
            Some(false) => v.push("skip-sanitize-payload"),
            Some(true) => v.push("sanitize-payload"),
            None => {}
        }
        v
    }

    /// Redis's `ACLDescribeUser` (ACL LIST, ACL SAVE), without `user <name> `.
    pub fn describe(&self, cat: &Catalog) -> Vec<u8> {
        let mut s = Vec::new();
        for f in self.flag_names() {
            s.extend_from_slice(f.as_bytes());
            s.push(b' ');
        }
        for p in &self.passwords {
            s.push(b'#');
            s.extend_from_slice(p.as_bytes());
            s.push(b' ');
        }
        for sel in &self.selectors {
            if sel.root {
                s.extend_from_slice(&sel.describe(cat));
            } else {
                s.extend_from_slice(b" (");
                s.extend_from_slice(&sel.describe(cat));
                s.push(b')');
            }
        }
        s
    }

    /// Every channel rule of every selector (`None`: some selector allows all).
    pub fn channel_rules(&self) -> Option<Vec<Vec<u8>>> {
        if self.selectors.iter().any(|s| s.allchannels) {
            return None;
        }
        Some(self.selectors.iter().flat_map(|s| s.channels.iter().cloned()).collect())
    }
}

fn valid_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64 || !h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Compares in a time that does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as usize;
    }
    diff == 0
}

/// Redis's `sdssplitargs`: words separated by spaces, with "double" (and
/// escapes) or 'single' quotes. None on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' && is_hex(line[i + 2]) && is_hex(line[i + 3]) {
                    cur.push(hex_val(line[i + 2]) * 16 + hex_val(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex_val(c: u8) -> u8 {
    (c as char).to_digit(16).unwrap_or(0) as u8
}

/// Redis's `ACLMergeSelectorArguments`: `(`...`)` spread over several
/// arguments becomes one. Err(index) of an unclosed `(`.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((_, sel)) = &mut open {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// Why an ACL LOG entry was written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LogReason {
    Command,
    Key,
    Channel,
    Auth,
}

impl LogReason {
    pub fn name(self) -> &'static str {
        match self {
            LogReason::Command => "command",
            LogReason::Key => "key",
            LogReason::Channel => "channel",
            LogReason::Auth => "auth",
        }
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: LogReason,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix ms of the last occurrence.
    pub ctime_ms: u64,
    pub client_info: String,
}

/// Entries alike within this time are counted as one (Redis's 60 s).
const LOG_GROUPING_MS: u64 = 60_000;

/// The users, and the ACL LOG.
pub struct Acl {
    pub catalog: Catalog,
    users: RwLock<Arc<BTreeMap<Vec<u8>, Arc<User>>>>,
    generation: AtomicU64,
    /// Serializes changes (read-modify-write of the snapshot).
    change: Mutex<()>,
    log: Mutex<VecDeque<LogEntry>>,
}

impl Acl {
    pub fn new(catalog: Catalog) -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::new_default(&catalog)));
        Acl {
            catalog,
            users: RwLock::new(Arc::new(users)),
            generation: AtomicU64::new(1),
            change: Mutex::new(()),
            log: Mutex::new(VecDeque::new()),
        }
    }

    /// Bumped on every change of any user.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    pub fn snapshot(&self) -> Arc<BTreeMap<Vec<u8>, Arc<User>>> {
        self.users.read().clone()
    }

    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.user(b"default").expect("the default user always exists")
    }

    /// Changes the users under one lock: `f` edits a copy of the table,
    /// which replaces the old one when it returns Ok.
    pub fn modify<R, E>(&self, f: impl FnOnce(&mut BTreeMap<Vec<u8>, Arc<User>>) -> Result<R, E>) -> Result<R, E> {
        let _guard = self.change.lock();
        let mut table = (**self.users.read()).clone();
        let r = f(&mut table)?;
        *self.users.write() = Arc::new(table);
        self.generation.fetch_add(1, Relaxed);
        Ok(r)
    }

    /// Whether clients must authenticate: the default user has a password
    /// or is off.
    pub fn auth_required(&self) -> bool {
        let d = self.default_user();
        !d.nopass || !d.enabled
    }

    /// Adds an entry, or counts it into a like one from the last minute.
    pub fn log(&self, mut entry: LogEntry, max_len: usize) {
        let mut log = self.log.lock();
        let like = log.iter().position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && entry.ctime_ms.saturating_sub(e.ctime_ms) <= LOG_GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(i) = like {
            let mut old = log.remove(i).expect("found");
            old.count += 1;
            old.ctime_ms = entry.ctime_ms;
            old.client_info = std::mem::take(&mut entry.client_info);
            entry = old;
        }
        log.push_front(entry);
        log.truncate(max_len);
    }

    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(count).cloned().collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let e = |name: &str, parent: Option<usize>, cats: &[&str]| CatalogEntry {
            name: name.into(),
            parent,
            categories: cats.iter().map(|c| category_bit(c.as_bytes()).unwrap()).fold(0, |a, b| a | b),
        };
        Catalog::new(vec![
            e("get", None, &["read", "string", "fast"]),
            e("set", None, &["write", "string", "slow"]),
            e("config", None, &["slow"]),
            e("config|get", Some(2), &["admin", "slow", "dangerous"]),
            e("select", None, &["fast", "connection"]),
        ])
    }

    fn user(rules: &[&str]) -> Result<User, RuleError> {
        let cat = catalog();
        let mut u = User::new(b"u", &cat, false);
        for r in rules {
            u.apply(&cat, r.as_bytes(), false)?;
        }
        Ok(u)
    }

    #[test]
    fn rules_and_descriptions() {
        let cat = catalog();
        let u = user(&["on", "+@read", "+select|0", "~a*", "%R~b*", "&ch"]).unwrap();
        assert_eq!(
            String::from_utf8(u.describe(&cat)).unwrap(),
            "on ~a* %R~b* resetchannels &ch -@all +@read +select|0"
        );
        // config|get is the catalog's only @admin command: the category describes it.
        let u = user(&["+@all", "-config|get"]).unwrap();
        assert_eq!(u.root().commands_text(&cat), "+@all -@admin");
        let u = user(&["-@all", "+config", "-config|get"]).unwrap();
        assert_eq!(u.root().commands_text(&cat), "-@all +config -config|get");
        assert_eq!(user(&["+config|get|x"]).unwrap_err(), RuleError::FirstArgOfSub);
        assert_eq!(user(&["+config|"]).unwrap_err(), RuleError::Syntax);
        assert_eq!(user(&["-select|0"]).unwrap_err(), RuleError::UnknownCommand);
        assert_eq!(user(&["allkeys", "~x"]).unwrap_err(), RuleError::KeyAfterAll);
        assert_eq!(user(&["%~x"]).unwrap_err(), RuleError::Syntax);
        assert_eq!(user(&["#abc"]).unwrap_err(), RuleError::BadHash);
        assert_eq!(user(&["(+get \"\")"]).unwrap_err(), RuleError::Syntax);
        assert_eq!(user(&["(\"unbalanced)"]).unwrap().extra_selectors().len(), 1);
        assert_eq!(user(&["+"]).unwrap_err(), RuleError::UnknownCommand);
        assert_eq!(user(&["%"]).unwrap_err(), RuleError::Syntax);
        assert_eq!(user(&["<nope"]).unwrap_err(), RuleError::NoSuchPassword);
    }

    #[test]
    fn checks_pick_the_most_relevant_refusal() {
        let u = user(&["+get", "%R~r*", "(+set ~w*)"]).unwrap();
        let args: Vec<&[u8]> = vec![b"get", b"r1"];
        let req = |id, keys: &'static [(usize, u8)]| Request {
            id,
            args: &[],
            firstarg: 1,
            no_auth: false,
            keys,
            channels: &[],
        };
        let _ = req;
        let ok = Request { id: 0, args: &args, firstarg: 1, no_auth: false, keys: &[(1, KEY_READ)], channels: &[] };
        assert_eq!(u.check(&ok), Ok(()));
        let args2: Vec<&[u8]> = vec![b"get", b"x"];
        let bad = Request { id: 0, args: &args2, firstarg: 1, no_auth: false, keys: &[(1, KEY_READ)], channels: &[] };
        assert_eq!(u.check(&bad), Err(Denied::Key(1)));
        let cmd = Request { id: 2, args: &args2, firstarg: 1, no_auth: false, keys: &[], channels: &[] };
        assert_eq!(u.check(&cmd), Err(Denied::Command));
    }

    #[test]
    fn selector_arguments_merge() {
        let args: Vec<&[u8]> = vec![b"on", b"(+get", b"~x)", b"(~y)"];
        assert_eq!(merge_selector_args(&args).unwrap(), vec![b"on".to_vec(), b"(+get ~x)".to_vec(), b"(~y)".to_vec()]);
        let bad: Vec<&[u8]> = vec![b"(+get", b"x"];
        assert_eq!(merge_selector_args(&bad), Err(0));
        assert_eq!(split_args(b"a 'b c' \"d\\x41\"").unwrap(), vec![b"a".to_vec(), b"b c".to_vec(), b"dA".to_vec()]);
        assert!(split_args(b"\"open").is_none());
    }
}
