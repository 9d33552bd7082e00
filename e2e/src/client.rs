//! Writing and verifying keys over the Redis protocol on one connection (a Service spreads
//! connections over independent pods, so a check must stay on the connection that wrote).

use redis::{Commands, Connection};

/// Connects to `host:port` (5 s timeouts, so a dead endpoint fails instead of hanging).
pub fn connect(host: &str, port: u16) -> Result<Connection, String> {
    let client = redis::Client::open(format!("redis://{host}:{port}/")).map_err(|e| format!("bad address: {e}"))?;
    let timeout = std::time::Duration::from_secs(5);
    let conn = client.get_connection_with_timeout(timeout).map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    conn.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    Ok(conn)
}

/// SETs `keys` keys `<prefix>:<i>` = `value-<i>-<prefix>` in pipelined batches, then GETs them
/// all back; any missing or different value is an error naming the first bad key.
pub fn write_and_verify(host: &str, port: u16, keys: usize, prefix: &str) -> Result<String, String> {
    let mut conn = connect(host, port)?;
    let pong: String = redis::cmd("PING").query(&mut conn).map_err(|e| format!("PING: {e}"))?;
    if pong != "PONG" {
        return Err(format!("PING answered {pong:?}"));
    }
    let started = std::time::Instant::now();
    for batch in (0..keys).collect::<Vec<_>>().chunks(500) {
        let mut pipe = redis::pipe();
        for i in batch {
            pipe.set(format!("{prefix}:{i}"), format!("value-{i}-{prefix}")).ignore();
        }
        pipe.query::<()>(&mut conn).map_err(|e| format!("SET batch at {}: {e}", batch[0]))?;
    }
    verify(&mut conn, keys, prefix)?;
    let dbsize: usize = redis::cmd("DBSIZE").query(&mut conn).map_err(|e| format!("DBSIZE: {e}"))?;
    Ok(format!("{keys} keys written and read back in {:?} (dbsize {dbsize})", started.elapsed()))
}

/// GETs `<prefix>:0..keys` and checks each value.
pub fn verify(conn: &mut Connection, keys: usize, prefix: &str) -> Result<(), String> {
    for batch in (0..keys).collect::<Vec<_>>().chunks(500) {
        let names: Vec<String> = batch.iter().map(|i| format!("{prefix}:{i}")).collect();
        let values: Vec<Option<String>> = conn.mget(&names).map_err(|e| format!("MGET at {}: {e}", batch[0]))?;
        for (i, v) in batch.iter().zip(values) {
            let want = format!("value-{i}-{prefix}");
            if v.as_deref() != Some(want.as_str()) {
                return Err(format!("{prefix}:{i} = {v:?}, expected {want:?}"));
            }
        }
    }
    Ok(())
}

/// What [`flood`] did.
#[derive(Debug, Clone, Default)]
pub struct FloodReport {
    /// SETs answered `+OK`.
    pub ok: u64,
    /// SETs answered with an error (e.g. `-OOM` under `noeviction`).
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: std::time::Duration,
}

/// Writes `keys` distinct keys `<prefix>:<n, 12 digits>` (16 bytes with prefix `key`, as
/// redis-benchmark's `key:__rand_int__`) with `value_size`-byte values: `connections`
/// connections each keep `pipeline` SETs in flight per round trip (`redis-benchmark -t set
/// -P <pipeline> -c <connections> -r <huge>`), in raw RESP so that the client, not the node, is
/// never the bottleneck. A connection error (the node went away) is an error; error replies are
/// counted.
pub fn flood(
    host: &str,
    port: u16,
    keys: u64,
    value_size: usize,
    pipeline: usize,
    connections: usize,
    prefix: &str,
) -> Result<FloodReport, String> {
    use std::io::{Read, Write};
    let started = std::time::Instant::now();
    let value = vec![b'x'; value_size];
    let connections = connections.max(1) as u64;
    let pipeline = pipeline.max(1) as u64;
    let workers: Vec<_> = (0..connections)
        .map(|c| {
            let (host, prefix, value) = (host.to_owned(), prefix.to_owned(), value.clone());
            std::thread::spawn(move || -> Result<FloodReport, String> {
                let mut s = std::net::TcpStream::connect((host.as_str(), port))
                    .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
                s.set_nodelay(true).ok();
                s.set_read_timeout(Some(std::time::Duration::from_secs(30))).ok();
                let mut report = FloodReport::default();
                let mut out = Vec::with_capacity(pipeline as usize * (value.len() + 64));
                let mut input = vec![0u8; 64 << 10];
                let mut partial = Vec::new();
                // This connection's keys: c, c + connections, c + 2 * connections, ...
                let mut next = c;
                while next < keys {
                    out.clear();
                    let mut batch = 0;
                    while batch < pipeline && next < keys {
                        let key = format!("{prefix}:{next:012}");
                        write!(out, "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n", key.len(), value.len()).unwrap();
                        out.extend_from_slice(&value);
                        out.extend_from_slice(b"\r\n");
                        batch += 1;
                        next += connections;
                    }
                    s.write_all(&out).map_err(|e| format!("writing after {} replies: {e}", report.ok))?;
                    // Every reply to SET is one line: +OK or -ERR ...
                    let mut replies = 0;
                    while replies < batch {
                        let n = s.read(&mut input).map_err(|e| format!("reading after {} replies: {e}", report.ok))?;
                        if n == 0 {
                            return Err(format!("the node closed the connection after {} replies", report.ok));
                        }
                        partial.extend_from_slice(&input[..n]);
                        let mut start = 0;
                        while let Some(end) = partial[start..].windows(2).position(|w| w == b"\r\n") {
                            let line = &partial[start..start + end];
                            if line.first() == Some(&b'-') {
                                report.errors += 1;
                                report.first_error.get_or_insert_with(|| String::from_utf8_lossy(line).into_owned());
                            } else {
                                report.ok += 1;
                            }
                            replies += 1;
                            start += end + 2;
                        }
                        partial.drain(..start);
                    }
                }
                Ok(report)
            })
        })
        .collect();
    let mut total = FloodReport::default();
    let mut failure = None;
    for w in workers {
        match w.join().map_err(|_| "a flood thread panicked".to_owned()).and_then(|r| r) {
            Ok(r) => {
                total.ok += r.ok;
                total.errors += r.errors;
                total.first_error = total.first_error.or(r.first_error);
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    total.elapsed = started.elapsed();
    match failure {
        Some(e) => Err(e),
        None => Ok(total),
    }
}
