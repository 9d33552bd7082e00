//! The line CLIENT LIST, CLIENT INFO and ACL LOG show for a client.

use super::Node;
use crate::session::client::ClientInfo;
use crate::session::tracking::mode;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

/// One line of CLIENT LIST / CLIENT INFO in Redis 7.0's format (plus 7.2's
/// lib-name/lib-ver). `running` names the command the caller is executing.
pub fn client_line(node: &Node, info: &ClientInfo, running: Option<&str>) -> String {
    let now = crate::store::now_ms();
    let idle = now.saturating_sub(info.last_active_ms.load(Relaxed)) / 1000;
    let subs = info.subs.load(Relaxed);
    let psubs = info.psubs.load(Relaxed);
    let ssubs = info.ssubs.load(Relaxed);
    let multi = info.multi.load(Relaxed);
    let mut flags = String::new();
    if node.monitors.active() && node.monitors.contains(info.id) {
        flags.push('O');
    }
    if subs + psubs + ssubs > 0 {
        flags.push('P');
    }
    if multi != u32::MAX {
        flags.push('x');
    }
    if info.blocked.load(Relaxed) {
        flags.push('b');
    }
    let tracking = info.tracking.load(Relaxed);
    if tracking & mode::ON != 0 {
        flags.push('t');
    }
    if tracking & mode::BROKEN_REDIR != 0 {
        flags.push('R');
    }
    if tracking & mode::BCAST != 0 {
        flags.push('B');
    }
    if info.killed.load(Relaxed) {
        flags.push('A');
    }
    if info.addr.starts_with('/') {
        flags.push('U');
    }
    if info.no_evict.load(Relaxed) {
        flags.push('e');
    }
    if info.no_touch.load(Relaxed) {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let cmd = match running {
        Some(c) => c.to_string(),
        None => match info.last_cmd.load(Relaxed) {
            u32::MAX => "NULL".to_string(),
            idx if (idx as usize) < node.table.len() => node.table.get(idx as usize).name.to_string(),
            _ => "NULL".to_string(),
        },
    };
    let qbuf = info.qbuf.load(Relaxed);
    let omem = info.obuf.load(Relaxed) + info.pending_push.load(Relaxed);
    let text = |v: &parking_lot::Mutex<Option<Vec<u8>>>| {
        v.lock().as_deref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
    };
    let mut line = String::with_capacity(320);
    let _ = writeln!(
        line,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} \
         qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} \
         user={} redir={} resp={} lib-name={} lib-ver={}",
        info.id,
        info.addr,
        info.laddr,
        info.fd,
        text(&info.name),
        info.created.elapsed().as_secs(),
        idle,
        flags,
        info.db.load(Relaxed),
        subs,
        psubs,
        ssubs,
        if multi == u32::MAX { -1 } else { multi as i64 },
        qbuf,
        omem,
        qbuf + omem,
        cmd,
        String::from_utf8_lossy(&info.user.lock()),
        if tracking & mode::ON != 0 { info.redirect.load(Relaxed) as i64 } else { -1 },
        info.resp.load(Relaxed),
        text(&info.lib_name),
        text(&info.lib_ver),
    );
    line
}
