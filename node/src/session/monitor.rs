//! MONITOR's clients: every command another client runs is streamed to
//! them as one line. Whether anyone monitors is one relaxed load, so
//! commands pay nothing more while nobody does.

use super::client::ClientInfo;
use parking_lot::RwLock;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

/// Bytes a monitor may have queued: Redis's hard limit for its class
/// (`client-output-buffer-limit replica 256mb`).
pub const BACKLOG_LIMIT: usize = 256 << 20;

#[derive(Default)]
pub struct Monitors {
    /// How many clients monitor: the hot path's only check.
    count: AtomicUsize,
    clients: RwLock<Vec<Arc<ClientInfo>>>,
}

impl Monitors {
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    pub fn add(&self, client: Arc<ClientInfo>) {
        let mut clients = self.clients.write();
        clients.push(client);
        self.count.store(clients.len(), Relaxed);
    }

    /// Takes client `id` out (RESET, disconnection); no-op if it is not in.
    pub fn remove(&self, id: u64) {
        let mut clients = self.clients.write();
        clients.retain(|c| c.id != id);
        self.count.store(clients.len(), Relaxed);
    }

    /// Whether client `id` monitors (CLIENT LIST's `O` flag).
    pub fn contains(&self, id: u64) -> bool {
        self.clients.read().iter().any(|c| c.id == id)
    }

    /// Sends `line` (a whole RESP simple string) to every monitor. A
    /// monitor that stops reading is disconnected past `BACKLOG_LIMIT`
    /// bytes queued, so it cannot make the server hold unbounded memory.
    pub fn feed(&self, line: &[u8]) {
        for c in self.clients.read().iter() {
            let pending = c.pending_push.fetch_add(line.len(), Relaxed) + line.len();
            if pending > BACKLOG_LIMIT {
                c.pending_push.fetch_sub(line.len(), Relaxed);
                if !c.killed.load(Relaxed) {
                    tracing::warn!(client = c.id, addr = %c.addr, "closing MONITOR client over its output buffer limit");
                    c.kill();
                }
                continue;
            }
            if !c.push(line.to_vec()) {
                c.pending_push.fetch_sub(line.len(), Relaxed);
            }
        }
    }
}

/// Who ran a command, as MONITOR shows it.
pub enum Origin<'a> {
    /// A TCP client: its `ip:port`.
    Peer(&'a str),
    /// A Unix-socket client: the server's socket path.
    Unix(&'a str),
    /// A script's `redis.call`.
    Lua,
}

/// One MONITOR line, as Redis 7.0 writes it:
/// `+<unix s>.<µs> [<db> <origin>] "arg" "arg"...\r\n`, each argument
/// quoted as `sdscatrepr` does and those at `redacted` as `(redacted)`.
pub fn format_line(unix_us: u64, db: usize, origin: Origin<'_>, args: &[&[u8]], redacted: &[usize]) -> Vec<u8> {
    let mut line = format!("+{}.{:06} [{db} ", unix_us / 1_000_000, unix_us % 1_000_000).into_bytes();
    match origin {
        Origin::Peer(addr) => line.extend_from_slice(addr.as_bytes()),
        Origin::Unix(path) => {
            line.extend_from_slice(b"unix:");
            line.extend_from_slice(path.as_bytes());
        }
        Origin::Lua => line.extend_from_slice(b"lua"),
    }
    line.extend_from_slice(b"] ");
    for (j, arg) in args.iter().enumerate() {
        if j > 0 {
            line.push(b' ');
        }
        let arg: &[u8] = if redacted.contains(&j) { b"(redacted)" } else { arg };
        quote_into(&mut line, arg);
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Redis's `sdscatrepr`: a double-quoted string with C escapes, other
/// unprintable bytes as `\xhh`.
fn quote_into(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_look_like_redis() {
        let args: [&[u8]; 3] = [b"set", b"k\"\n\x01", b"v"];
        let line = format_line(1_700_000_000_123_456, 0, Origin::Peer("127.0.0.1:50000"), &args, &[]);
        assert_eq!(line, b"+1700000000.123456 [0 127.0.0.1:50000] \"set\" \"k\\\"\\n\\x01\" \"v\"\r\n");
        let args: [&[u8]; 2] = [b"auth", b"secret"];
        assert_eq!(
            format_line(1_000_042, 3, Origin::Lua, &args, &[1]),
            b"+1.000042 [3 lua] \"auth\" \"(redacted)\"\r\n"
        );
        assert!(
            format_line(0, 0, Origin::Unix("/tmp/s.sock"), &args, &[]).starts_with(b"+0.000000 [0 unix:/tmp/s.sock] ")
        );
    }
}
