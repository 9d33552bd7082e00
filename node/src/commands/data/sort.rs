//! Commands: SORT and SORT_RO on lists, sets and sorted sets — BY (with
//! `nosort` and `->field` hash lookups), LIMIT, GET, ASC/DESC, ALPHA and
//! STORE — following Redis 7.0's sort.c, quirks included.

use crate::base::eq_ic;
use crate::base::strtod::parse_sort_weight;
use crate::commands::args::c_str;
use crate::commands::{CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::list::ListValue;
use crate::store::{KeyAccess, Value, ValueRef};
use smallvec::SmallVec;
use std::cmp::Ordering;

/// Reads keys named by patterns: takes every partition when it needs them.
const PK: u32 = flags::PATTERN_KEYS;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("sort", -2, flags::WRITE | flags::DENYOOM | PK, Keys::Custom(sort_keys), sort)
        .acl("@write @set @sortedset @list @slow @dangerous"),
    CommandDef::new("sort_ro", -2, flags::READONLY | PK, Keys::Custom(sort_ro_keys), sort_ro)
        .acl("@read @set @sortedset @list @slow @dangerous"),
];

/// The sorted key and the last STORE destination (Redis's `sortGetKeys`,
/// which skips the arguments of LIMIT, GET and BY).
fn sort_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut keys = SmallVec::new();
    keys.push(1);
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
    keys.extend(store);
    keys
}

fn sort_ro_keys(_args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    SmallVec::from_slice(&[1])
}

fn sort(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    sort_generic(ctx, args, out, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    sort_generic(ctx, args, out, true)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Whether looking `pattern` up reads other keys (everything but `#`).
fn reads_keys(pattern: &[u8]) -> bool {
    c_str(pattern) != b"#" && c_str(pattern).contains(&b'*')
}

/// The key a pattern names for `elem` — the first `*` replaced by it, a
/// `->field` suffix (non-empty) split off — or None for `#` and patterns
/// without `*`.
fn pattern_key<'p>(pattern: &'p [u8], elem: &[u8]) -> Option<(Vec<u8>, Option<&'p [u8]>)> {
    let pat = c_str(pattern);
    let star = pat.iter().position(|&b| b == b'*').filter(|_| pat != b"#")?;
    let arrow = find(&pat[star + 1..], b"->").map(|i| star + 1 + i).filter(|&i| i + 2 < pat.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    Some((key, arrow.map(|a| &pattern[a + 2..])))
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// string at the pattern's key, or the hash field it names. None for a
/// missing key, another type or no `*`.
fn lookup_by_pattern(keys: &mut KeyAccess<'_>, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if c_str(pattern) == b"#" {
        return Some(elem.to_vec());
    }
    let (key, field) = pattern_key(pattern, elem)?;
    let entry = keys.get(&key)?;
    match (field, entry.value()) {
        (Some(f), ValueRef::Hash(h)) => h.get(f).cloned(),
        (None, ValueRef::Str(s)) => Some(s.to_vec()),
        _ => None,
    }
}

struct Item {
    elem: Vec<u8>,
    score: f64,
    /// The BY value for ALPHA with a pattern (None: the key was missing).
    cmp: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, readonly: bool) -> CmdResult {
    let (mut desc, mut alpha, mut dontsort) = (false, false, false);
    let (mut limit_start, mut limit_count) = (0i64, -1i64);
    let mut sortby: Option<&[u8]> = None;
    let mut store: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut j = 2;
    while j < args.len() {
        let a = args[j];
        let left = args.len() - j - 1;
        if eq_ic(a, "asc") {
            desc = false;
        } else if eq_ic(a, "desc") {
            desc = true;
        } else if eq_ic(a, "alpha") {
            alpha = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            limit_start = arg_i64(args[j + 1])?;
            limit_count = arg_i64(args[j + 2])?;
            j += 2;
        } else if !readonly && eq_ic(a, "store") && left >= 1 {
            store = Some(args[j + 1]);
            j += 1;
        } else if eq_ic(a, "by") && left >= 1 {
            sortby = Some(args[j + 1]);
            // A pattern without '*' names no keys: nothing to sort by.
            dontsort = !c_str(args[j + 1]).contains(&b'*');
            // A real pattern may name keys of any slot (other nodes'), as Redis refuses.
            if !dontsort && ctx.config().startup.cluster_enabled {
                return Err("ERR BY option of SORT denied in Cluster mode.".into());
            }
            j += 1;
        } else if eq_ic(a, "get") && left >= 1 {
            if ctx.config().startup.cluster_enabled {
                return Err("ERR GET option of SORT denied in Cluster mode.".into());
            }
            gets.push(args[j + 1]);
            j += 1;
        } else {
            return Err(err::SYNTAX.into());
        }
        j += 1;
    }

    // Pattern lookups may touch any key: hold every partition (taken in
    // order, before anything is read; EXEC and scripts already hold them).
    let by_reads = !dontsort && sortby.is_some_and(reads_keys);
    // Run by a client directly, not by EXEC or a script (which hold every
    // partition already and cannot wait halfway through).
    let standalone = !ctx.keys.locked.is_all();
    if (by_reads || gets.iter().any(|g| reads_keys(g))) && standalone {
        ctx.keys.locked = ctx.keys.ks.lock_none();
        ctx.keys.locked = ctx.keys.ks.lock_all();
    }

    // The elements, in the container's own order.
    let (mut items, is_set, ordered) = {
        let mk = |e: &[u8]| Item { elem: e.to_vec(), score: 0.0, cmp: None };
        match ctx.keys.get(args[1]).map(|e| e.value()) {
            None => (Vec::new(), false, true),
            Some(ValueRef::List(l)) => (l.iter().map(|e| mk(e)).collect::<Vec<_>>(), false, true),
            Some(ValueRef::Set(s)) => (s.iter().map(mk).collect(), true, false),
            Some(ValueRef::ZSet(z)) => (z.iter().map(|(m, _)| mk(m)).collect(), false, true),
            Some(_) => return Err(err::WRONGTYPE.into()),
        }
    };
    // Keys the patterns name that are not ready in RAM: wait for them
    // before anything is read, then run again (the pending path).
    if standalone && ctx.keys.ks.may_pend() {
        let mut patterns: Vec<&[u8]> = gets.clone();
        if !dontsort && let Some(by) = sortby {
            patterns.push(by);
        }
        let named: Vec<Vec<u8>> = items
            .iter()
            .flat_map(|it| patterns.iter().filter_map(|p| pattern_key(p, &it.elem).map(|(k, _)| k)))
            .collect();
        if let Some(wait) = ctx.keys.pending(named.iter().map(|k| k.as_slice())) {
            ctx.pending = Some(wait);
            return Ok(());
        }
    }
    // A set has no order of its own: with STORE, or for a script, it is
    // sorted ALPHA so the result is deterministic (as Redis does).
    if dontsort && is_set && (store.is_some() || ctx.in_script) {
        dontsort = false;
        alpha = true;
        sortby = None;
    }

    let len = items.len() as i64;
    let mut start = limit_start.max(0).min(len);
    let count = limit_count.max(-1).min(len);
    let mut end = if count < 0 { len - 1 } else { start + count - 1 };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }

    if dontsort {
        // Lists and sorted sets keep their order, reversed by DESC.
        if ordered && desc {
            items.reverse();
        }
    } else {
        let mut conversion_error = false;
        for it in &mut items {
            let by = match sortby {
                Some(p) => match lookup_by_pattern(&mut ctx.keys, p, &it.elem) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if alpha {
                if sortby.is_some() {
                    it.cmp = Some(by);
                }
            } else {
                match parse_sort_weight(&by) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        if conversion_error {
            return Err("ERR One or more scores can't be converted into double".into());
        }
        let by_pattern = sortby.is_some();
        let binary = store.is_some();
        // Without STORE Redis compares with strcoll on C strings (the C
        // locale here: bytes up to the first NUL); with STORE, binary-safe.
        let text_cmp = |a: &[u8], b: &[u8]| if binary { a.cmp(b) } else { c_str(a).cmp(c_str(b)) };
        items.sort_by(|a, b| {
            let ord = if !alpha {
                a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal).then_with(|| a.elem.cmp(&b.elem))
            } else if by_pattern {
                match (&a.cmp, &b.cmp) {
                    (Some(x), Some(y)) => text_cmp(x, y),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                }
            } else {
                text_cmp(&a.elem, &b.elem)
            };
            if desc { ord.reverse() } else { ord }
        });
    }

    let range = if end >= start { start as usize..(end + 1) as usize } else { 0..0 };
    let selected = &items[range];
    let outputlen = if gets.is_empty() { selected.len() } else { selected.len() * gets.len() };
    let Some(dst) = store else {
        out.array(outputlen);
        for it in selected {
            if gets.is_empty() {
                out.bulk(&it.elem);
            }
            for g in &gets {
                match lookup_by_pattern(&mut ctx.keys, g, &it.elem) {
                    Some(v) => out.bulk(&v),
                    None => out.null(),
                }
            }
        }
        return Ok(());
    };
    let mut list = ListValue::default();
    for it in selected {
        if gets.is_empty() {
            list.push_back(it.elem.clone());
        }
        for g in &gets {
            list.push_back(lookup_by_pattern(&mut ctx.keys, g, &it.elem).unwrap_or_default());
        }
    }
    if outputlen > 0 {
        ctx.keys.set(dst, Value::List(list), 0, false);
        // A list event in Redis, though SORT is a generic command.
        ctx.notify(ev::LIST, "sortstore", dst);
    } else if ctx.keys.delete(dst) {
        ctx.notify(ev::GENERIC, "del", dst);
    }
    out.int(outputlen as i64);
    Ok(())
}
