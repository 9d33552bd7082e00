//! Streams in Redis's RDB encoding (DUMP/RESTORE, the log): a rax of
//! listpacks keyed by master ID, then the stream's counters, then the
//! consumer groups with their PELs and consumers.
//!
//! Each listpack starts with a master entry (live count, deleted count,
//! master field names, 0) followed by entries: flags, ms and seq deltas from
//! the master ID, [field count and names unless SAMEFIELDS,] values, and
//! the entry's element count. Written with only live entries.

use super::listpack::ListpackWriter;
use super::rdb::{DumpError, Reader, T_STREAM_LISTPACKS, T_STREAM_LISTPACKS_3, listpack, put_len, put_str};
use super::stream::{ENTRIES_READ_INVALID, Group, Pending, StreamId, StreamValue};
use crate::base::parse_i64;

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

type R<T> = Result<T, DumpError>;

/// Appends a stream's body (after the type byte) in STREAM_LISTPACKS_2 form.
pub fn encode(s: &StreamValue, out: &mut Vec<u8>) {
    let nodes: Vec<(StreamId, &super::stream::Node)> = s.nodes().filter(|(_, n)| n.live > 0).collect();
    put_len(out, nodes.len() as u64);
    let ends: Vec<Option<StreamId>> = nodes.iter().skip(1).map(|(k, _)| Some(*k)).chain([None]).collect();
    for ((master, node), end) in nodes.iter().zip(ends) {
        let mut lp = ListpackWriter::default();
        lp.int(node.live as i64);
        lp.int(0);
        lp.int(node.master_fields.len() as i64);
        for f in &node.master_fields {
            lp.str(f);
        }
        lp.int(0);
        let entries = s.range(*master, end.and_then(StreamId::prev).unwrap_or(StreamId::MAX));
        for (id, fields) in entries {
            let n = fields.len() / 2;
            let same = node.master_fields.len() == n
                && node.master_fields.iter().zip(fields.chunks_exact(2)).all(|(m, f)| *m == f[0]);
            lp.int(if same { FLAG_SAMEFIELDS } else { 0 });
            lp.int(id.ms.wrapping_sub(master.ms) as i64);
            lp.int(id.seq.wrapping_sub(master.seq) as i64);
            if same {
                for f in fields.chunks_exact(2) {
                    lp.str(&f[1]);
                }
                lp.int(n as i64 + 3);
            } else {
                lp.int(n as i64);
                for f in fields {
                    lp.str(f);
                }
                lp.int(2 * n as i64 + 4);
            }
        }
        put_str(out, &master.to_be_bytes());
        put_str(out, &lp.finish());
    }
    put_len(out, s.len() as u64);
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_id);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_str(out, name);
        put_id(out, g.last_id);
        put_len(out, g.entries_read as u64);
        put_len(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&p.delivery_time.to_le_bytes());
            put_len(out, p.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_str(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&id.to_be_bytes());
            }
        }
    }
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

fn read_u64(r: &mut Reader<'_>) -> R<u64> {
    match r.len_or_enc()? {
        (n, false) => Ok(n),
        _ => Err(DumpError::Format),
    }
}

fn read_id(r: &mut Reader<'_>) -> R<StreamId> {
    Ok(StreamId::new(read_u64(r)?, read_u64(r)?))
}

fn read_ms(r: &mut Reader<'_>) -> R<u64> {
    Ok(u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| DumpError::Format)?))
}

fn raw_id(r: &mut Reader<'_>) -> R<StreamId> {
    StreamId::from_be_bytes(r.take(16)?).ok_or(DumpError::Format)
}

/// Reads a stream's body of type `t` (15, 19 or 21).
pub fn decode(r: &mut Reader<'_>, t: u8) -> R<StreamValue> {
    let mut s = StreamValue::default();
    let nodes = r.len()?;
    for _ in 0..nodes {
        let master = StreamId::from_be_bytes(&r.string()?).ok_or(DumpError::Format)?;
        let items = listpack(&r.string()?)?;
        load_node(&mut s, master, &items)?;
    }
    let length = read_u64(r)?;
    s.last_id = read_id(r)?;
    if t == T_STREAM_LISTPACKS {
        s.first_id = s.first().map(|(id, _)| id).unwrap_or(StreamId::MIN);
        s.entries_added = length;
    } else {
        s.first_id = read_id(r)?;
        s.max_deleted_id = read_id(r)?;
        s.entries_added = read_u64(r)?;
    }
    if length != s.len() as u64 || s.last().is_some_and(|(id, _)| id > s.last_id) {
        return Err(DumpError::Format);
    }
    let groups = r.len()?;
    for _ in 0..groups {
        let name = r.string()?;
        let last_id = read_id(r)?;
        let entries_read = if t == T_STREAM_LISTPACKS { s.estimate_entries_read(last_id) } else { read_u64(r)? as i64 };
        let mut g = Group::new(last_id, entries_read.max(ENTRIES_READ_INVALID));
        let pending = r.len()?;
        for _ in 0..pending {
            let id = raw_id(r)?;
            let delivery_time = read_ms(r)?;
            let delivery_count = read_u64(r)?;
            g.pel.insert(id, Pending { consumer: Vec::new(), delivery_time, delivery_count });
        }
        let consumers = r.len()?;
        for _ in 0..consumers {
            let cname = r.string()?;
            let seen_time = read_ms(r)?;
            if t == T_STREAM_LISTPACKS_3 {
                read_ms(r)?; // active time (Redis 7.2)
            }
            let (c, created) = g.consumer(&cname, seen_time);
            if !created {
                return Err(DumpError::Format);
            }
            let owned = r.len()?;
            for _ in 0..owned {
                let id = raw_id(r)?;
                c.pel.insert(id);
            }
            let ids: Vec<StreamId> = g.consumers[&cname].pel.iter().copied().collect();
            for id in ids {
                let p = g.pel.get_mut(&id).ok_or(DumpError::Format)?;
                if !p.consumer.is_empty() {
                    return Err(DumpError::Format);
                }
                p.consumer = cname.clone();
            }
        }
        if g.pel.values().any(|p| p.consumer.is_empty()) || s.groups.insert(name, g).is_some() {
            return Err(DumpError::Format);
        }
    }
    Ok(s)
}

fn int(item: Option<&Vec<u8>>) -> R<i64> {
    item.and_then(|v| parse_i64(v)).ok_or(DumpError::Format)
}

/// Loads the live entries of one node's listpack.
fn load_node(s: &mut StreamValue, master: StreamId, items: &[Vec<u8>]) -> R<()> {
    let mut it = items.iter();
    let live = int(it.next())?;
    let _deleted = int(it.next())?;
    let nfields = usize::try_from(int(it.next())?).map_err(|_| DumpError::Format)?;
    if nfields > items.len() {
        return Err(DumpError::Format);
    }
    let master_fields: Vec<&Vec<u8>> = it.by_ref().take(nfields).collect();
    if master_fields.len() != nfields || int(it.next())? != 0 {
        return Err(DumpError::Format);
    }
    let mut loaded = 0;
    while let Some(flags) = it.next() {
        let flags = int(Some(flags))?;
        let ms = master.ms.wrapping_add(int(it.next())? as u64);
        let seq = master.seq.wrapping_add(int(it.next())? as u64);
        let mut fields = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master_fields {
                fields.push((*f).clone());
                fields.push(it.next().ok_or(DumpError::Format)?.clone());
            }
        } else {
            let n = usize::try_from(int(it.next())?).map_err(|_| DumpError::Format)?;
            if n > items.len() {
                return Err(DumpError::Format);
            }
            for _ in 0..2 * n {
                fields.push(it.next().ok_or(DumpError::Format)?.clone());
            }
        }
        int(it.next())?; // the entry's element count
        if flags & FLAG_DELETED == 0 {
            if !s.load_entry(master, StreamId::new(ms, seq), fields) {
                return Err(DumpError::Format);
            }
            loaded += 1;
        }
    }
    if loaded != live {
        return Err(DumpError::Format);
    }
    Ok(())
}
