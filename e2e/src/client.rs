//! Writing and verifying keys over the Redis protocol on one connection (a Service spreads
//! connections over independent pods, so a check must stay on the connection that wrote).

use redis::Connection;

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

/// GETs `<prefix>:0..keys` and checks each value. Pipelined single-key GETs rather than MGET:
/// in cluster mode the keys live in many slots, and a multi-key command across slots gets
/// CROSSSLOT (a plain client's GETs are forwarded to each key's owner).
pub fn verify(conn: &mut Connection, keys: usize, prefix: &str) -> Result<(), String> {
    for batch in (0..keys).collect::<Vec<_>>().chunks(500) {
        let mut pipe = redis::pipe();
        for i in batch {
            pipe.get(format!("{prefix}:{i}"));
        }
        let values: Vec<Option<String>> = pipe.query(conn).map_err(|e| format!("GET batch at {}: {e}", batch[0]))?;
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

/// The value [`write_with_ack_log`] writes for key number `i`: `value-<i>-<prefix>`, padded with
/// `.` to `size` bytes (at least the bare value).
pub fn logged_value(i: u64, prefix: &str, size: usize) -> Vec<u8> {
    let mut v = format!("value-{i}-{prefix}").into_bytes();
    if v.len() < size {
        v.resize(size, b'.');
    }
    v
}

/// What [`write_with_ack_log`] did: the key numbers whose SET was answered `+OK` (as
/// half-open ranges), and the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckLog {
    /// `[start, end)` ranges of acknowledged key numbers, ascending.
    pub acked: Vec<(u64, u64)>,
    /// SETs sent whose reply never came (the connection broke): each may or may not be there.
    pub unknown: u64,
    /// SETs answered with an error other than `-LOADING`.
    pub errors: u64,
    pub first_error: Option<String>,
    /// SETs answered `-LOADING` (a node replaying its log after a restart: not run), or, for
    /// the cluster-aware writer, sent again after it (as cluster clients do).
    pub loading: u64,
    /// Connections that broke (or could not be made) and were made again.
    pub reconnects: u64,
    pub elapsed_ms: u64,
}

impl AckLog {
    pub fn acked_count(&self) -> u64 {
        self.acked.iter().map(|(a, b)| b - a).sum()
    }

    fn ack(&mut self, i: u64) {
        match self.acked.last_mut() {
            Some((_, end)) if *end == i => *end += 1,
            _ => self.acked.push((i, i + 1)),
        }
    }

    /// One line: `acked=N unknown=U errors=E loading=L reconnects=C ms=T ranges=a-b,c-d
    /// first_error=...`.
    pub fn render(&self) -> String {
        let ranges: Vec<String> = self.acked.iter().map(|(a, b)| format!("{a}-{b}")).collect();
        format!(
            "acked={} unknown={} errors={} loading={} reconnects={} ms={} ranges={} first_error={}",
            self.acked_count(),
            self.unknown,
            self.errors,
            self.loading,
            self.reconnects,
            self.elapsed_ms,
            ranges.join(","),
            self.first_error.as_deref().unwrap_or("none").replace(' ', "_")
        )
    }

    /// Parses [`AckLog::render`]'s line (anywhere in `text`).
    pub fn parse(text: &str) -> Option<AckLog> {
        let line = text.lines().find(|l| l.contains("acked=") && l.contains("ranges="))?;
        let field =
            |name: &str| line.split_whitespace().find_map(|w| w.strip_prefix(name).and_then(|w| w.strip_prefix('=')));
        let num = |name: &str| field(name)?.parse::<u64>().ok();
        let mut acked = Vec::new();
        for r in field("ranges")?.split(',').filter(|r| !r.is_empty()) {
            let (a, b) = r.split_once('-')?;
            acked.push((a.parse().ok()?, b.parse().ok()?));
        }
        let log = AckLog {
            acked,
            unknown: num("unknown")?,
            errors: num("errors")?,
            loading: num("loading").unwrap_or(0),
            first_error: field("first_error").filter(|e| *e != "none").map(|e| e.replace('_', " ")),
            reconnects: num("reconnects")?,
            elapsed_ms: num("ms")?,
        };
        (log.acked_count() == num("acked")?).then_some(log)
    }
}

/// Writes keys `<prefix>:<i>` = [`logged_value`] for i = 0, 1, 2, ... on one connection,
/// `pipeline` SETs per round trip, for `duration`, and logs which were acknowledged. A broken
/// connection (the node was killed) is made again (every 100 ms until it answers) and the
/// writes go on with the next numbers: the SETs whose replies were lost count as unknown. With
/// `stop_after_errors` > 0 it stops once that many error replies came; numbering starts at `from`.
#[allow(clippy::too_many_arguments)]
pub fn write_with_ack_log(
    host: &str,
    port: u16,
    duration: std::time::Duration,
    pipeline: usize,
    value_size: usize,
    prefix: &str,
    from: u64,
    stop_after_errors: u64,
) -> AckLog {
    let started = std::time::Instant::now();
    let going = || started.elapsed() < duration;
    write_with_ack_log_while(host, port, &going, pipeline, value_size, prefix, from, stop_after_errors)
}

/// [`write_with_ack_log`] for as long as `going()` says.
#[allow(clippy::too_many_arguments)]
pub fn write_with_ack_log_while(
    host: &str,
    port: u16,
    going: &dyn Fn() -> bool,
    pipeline: usize,
    value_size: usize,
    prefix: &str,
    from: u64,
    stop_after_errors: u64,
) -> AckLog {
    use std::io::{BufRead, BufReader, Write};
    use std::net::ToSocketAddrs;
    use std::time::Duration;
    let started = std::time::Instant::now();
    let mut log = AckLog::default();
    let mut next = from;
    let mut connected_once = false;
    'connect: while going() {
        // Resolved on every attempt: a Service name keeps its address, a pod's may change.
        let addr = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next());
        let Some(stream) = addr.and_then(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).ok())
        else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        if connected_once {
            log.reconnects += 1;
        }
        connected_once = true;
        stream.set_nodelay(true).ok();
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut reader = BufReader::new(stream.try_clone().expect("cloning a socket"));
        let mut writer = stream;
        let mut out = Vec::new();
        while going() {
            if stop_after_errors > 0 && log.errors >= stop_after_errors {
                break 'connect;
            }
            out.clear();
            let first = next;
            for i in first..first + pipeline as u64 {
                let key = format!("{prefix}:{i}");
                let value = logged_value(i, prefix, value_size);
                write!(out, "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n", key.len(), value.len()).unwrap();
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
            }
            next += pipeline as u64;
            if writer.write_all(&out).is_err() {
                log.unknown += pipeline as u64;
                continue 'connect;
            }
            let mut line = String::new();
            for i in first..first + pipeline as u64 {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(n) if n > 0 && line.starts_with('+') => log.ack(i),
                    Ok(n) if n > 0 && line.starts_with("-LOADING") => log.loading += 1,
                    Ok(n) if n > 0 => {
                        log.errors += 1;
                        log.first_error.get_or_insert_with(|| line.trim_end().to_owned());
                    }
                    _ => {
                        log.unknown += first + pipeline as u64 - i;
                        continue 'connect;
                    }
                }
            }
        }
    }
    log.elapsed_ms = started.elapsed().as_millis() as u64;
    log
}

/// Reads back every acknowledged key of `log` (pipelined GETs, which work across slots in
/// cluster mode too): the numbers whose value is
/// missing or different, at most `limit` of them, and how many there were.
pub fn missing_acked(
    conn: &mut Connection,
    log: &AckLog,
    prefix: &str,
    value_size: usize,
    limit: usize,
) -> Result<(u64, Vec<u64>), String> {
    let mut lost = 0;
    let mut first = Vec::new();
    for &(a, b) in &log.acked {
        let mut at = a;
        while at < b {
            let end = (at + 500).min(b);
            let mut pipe = redis::pipe();
            for i in at..end {
                pipe.get(format!("{prefix}:{i}"));
            }
            let values: Vec<Option<Vec<u8>>> = pipe.query(conn).map_err(|e| format!("GET batch at {at}: {e}"))?;
            for (i, v) in (at..end).zip(values) {
                if v.as_deref() != Some(&logged_value(i, prefix, value_size)[..]) {
                    lost += 1;
                    if first.len() < limit {
                        first.push(i);
                    }
                }
            }
            at = end;
        }
    }
    Ok((lost, first))
}

/// What [`read_back`] found.
#[derive(Debug, Clone, Default)]
pub struct ReadReport {
    /// GETs answered with the value [`flood`] wrote.
    pub hits: u64,
    /// GETs answered nil (the key was evicted).
    pub misses: u64,
    /// GETs answered with another value, or an error.
    pub wrong: u64,
    pub first_wrong: Option<String>,
    pub elapsed: std::time::Duration,
}

/// GETs keys `<prefix>:<n, 12 digits>` for n < `keys` (what [`flood`] wrote with
/// `value_size`-byte values of `x`), `rounds` times over, on `connections` connections with
/// `pipeline` GETs in flight each. Nil counts as a miss; another value or an error as wrong. A
/// connection error (the node went away) is an error.
#[allow(clippy::too_many_arguments)]
pub fn read_back(
    host: &str,
    port: u16,
    keys: u64,
    value_size: usize,
    pipeline: usize,
    connections: usize,
    prefix: &str,
    rounds: u32,
) -> Result<ReadReport, String> {
    use std::io::{BufRead, BufReader, Read, Write};
    let started = std::time::Instant::now();
    let connections = connections.max(1) as u64;
    let pipeline = pipeline.max(1) as u64;
    let workers: Vec<_> = (0..connections)
        .map(|c| {
            let (host, prefix) = (host.to_owned(), prefix.to_owned());
            std::thread::spawn(move || -> Result<ReadReport, String> {
                let s = std::net::TcpStream::connect((host.as_str(), port))
                    .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
                s.set_nodelay(true).ok();
                s.set_read_timeout(Some(std::time::Duration::from_secs(30))).ok();
                let mut reader = BufReader::with_capacity(256 << 10, s.try_clone().map_err(|e| e.to_string())?);
                let mut writer = s;
                let mut report = ReadReport::default();
                let want = vec![b'x'; value_size];
                let mut out = Vec::new();
                let mut line = String::new();
                let mut value = Vec::new();
                let gone = |e: std::io::Error, r: &ReadReport| {
                    format!("reading on connection {c} after {} hits and {} misses: {e}", r.hits, r.misses)
                };
                for _ in 0..rounds {
                    let mut next = c;
                    while next < keys {
                        out.clear();
                        let mut batch = 0;
                        while batch < pipeline && next < keys {
                            let key = format!("{prefix}:{next:012}");
                            write!(out, "*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).unwrap();
                            batch += 1;
                            next += connections;
                        }
                        writer.write_all(&out).map_err(|e| format!("writing GETs: {e}"))?;
                        for _ in 0..batch {
                            line.clear();
                            if reader.read_line(&mut line).map_err(|e| gone(e, &report))? == 0 {
                                return Err(format!(
                                    "the node closed connection {c} after {} hits and {} misses",
                                    report.hits, report.misses
                                ));
                            }
                            let head = line.trim_end();
                            if head == "$-1" || head == "_" {
                                report.misses += 1;
                            } else if let Some(len) = head.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                                value.resize(len + 2, 0);
                                reader.read_exact(&mut value).map_err(|e| gone(e, &report))?;
                                if value[..len] == want[..] {
                                    report.hits += 1;
                                } else {
                                    report.wrong += 1;
                                    report.first_wrong.get_or_insert_with(|| format!("a {len}-byte value"));
                                }
                            } else {
                                report.wrong += 1;
                                report.first_wrong.get_or_insert_with(|| head.to_owned());
                            }
                        }
                    }
                }
                Ok(report)
            })
        })
        .collect();
    let mut total = ReadReport::default();
    let mut failure = None;
    for w in workers {
        match w.join().map_err(|_| "a read-back thread panicked".to_owned()).and_then(|r| r) {
            Ok(r) => {
                total.hits += r.hits;
                total.misses += r.misses;
                total.wrong += r.wrong;
                total.first_wrong = total.first_wrong.or(r.first_wrong);
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

/// What [`cluster_write_with_ack_log`] saw besides acknowledgements.
#[derive(Debug, Clone, Default)]
pub struct Redirects {
    pub moved: u64,
    pub ask: u64,
    pub tryagain: u64,
    /// Connections that failed (a pod going away): the slot map is read again and the write
    /// sent again.
    pub reconnects: u64,
}

/// A cluster-aware writer, as a Redis Cluster client library behaves: it reads the slot map
/// (CLUSTER SLOTS) from `seed`, sends each SET to the slot's owner, follows `-MOVED` (and
/// updates its map), `-ASK` (ASKING first) and `-TRYAGAIN` (a pause), and on a connection
/// failure reads the map again from the seed and sends the write again. Keys `<prefix>:<i>` =
/// [`logged_value`] for i = 0, 1, ... while `going()`. Any other error reply counts in the
/// log's errors.
pub fn cluster_write_with_ack_log(
    seed: (&str, u16),
    going: &dyn Fn() -> bool,
    value_size: usize,
    prefix: &str,
) -> (AckLog, Redirects) {
    use std::collections::HashMap;
    use std::time::Duration;
    let started = std::time::Instant::now();
    let mut log = AckLog::default();
    let mut seen = Redirects::default();
    let mut conns: HashMap<String, Connection> = HashMap::new();
    let seed_addr = format!("{}:{}", seed.0, seed.1);
    let mut slots: Vec<String> = vec![seed_addr.clone(); 16384];
    let refresh = |slots: &mut Vec<String>| {
        let Ok(mut c) = connect(seed.0, seed.1) else { return };
        let Ok(redis::Value::Array(ranges)) = redis::cmd("CLUSTER").arg("SLOTS").query::<redis::Value>(&mut c) else {
            return;
        };
        for r in ranges {
            let redis::Value::Array(r) = r else { continue };
            let (Some(redis::Value::Int(a)), Some(redis::Value::Int(b)), Some(redis::Value::Array(node))) =
                (r.first(), r.get(1), r.get(2))
            else {
                continue;
            };
            let host = match node.first() {
                Some(redis::Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                _ => continue,
            };
            let Some(redis::Value::Int(port)) = node.get(1) else { continue };
            for s in *a..=*b {
                slots[s as usize] = format!("{host}:{port}");
            }
        }
    };
    refresh(&mut slots);
    let mut i = 0u64;
    while going() {
        let key = format!("{prefix}:{i}");
        let value = logged_value(i, prefix, value_size);
        let mut addr = slots[slot_of(key.as_bytes()) as usize].clone();
        let mut asking = false;
        let mut acked = false;
        for _attempt in 0..50 {
            if !conns.contains_key(&addr) {
                let (h, p) = addr.rsplit_once(':').unwrap_or((&addr, "6380"));
                match connect(h, p.parse().unwrap_or(6380)) {
                    Ok(c) => {
                        conns.insert(addr.clone(), c);
                    }
                    Err(_) => {
                        seen.reconnects += 1;
                        std::thread::sleep(Duration::from_millis(100));
                        refresh(&mut slots);
                        addr = slots[slot_of(key.as_bytes()) as usize].clone();
                        continue;
                    }
                }
            }
            let conn = conns.get_mut(&addr).expect("connected above");
            if asking {
                let _: redis::RedisResult<String> = redis::cmd("ASKING").query(conn);
                asking = false;
            }
            let reply: redis::RedisResult<String> = redis::cmd("SET").arg(&key).arg(&value).query(conn);
            match reply {
                Ok(_) => {
                    acked = true;
                    break;
                }
                Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Moved) => {
                    seen.moved += 1;
                    if let Some((to, _)) = e.redirect_node() {
                        slots[slot_of(key.as_bytes()) as usize] = to.to_owned();
                        addr = to.to_owned();
                    }
                }
                Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask) => {
                    seen.ask += 1;
                    if let Some((to, _)) = e.redirect_node() {
                        addr = to.to_owned();
                        asking = true;
                    }
                }
                Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain) => {
                    seen.tryagain += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                // A master replaying its log after a restart: cluster clients wait and retry
                // (redis-rs's cluster client does for LOADING).
                Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading) => {
                    log.loading += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => {
                    // Sent, no answer: may or may not be there; sent again below.
                    seen.reconnects += 1;
                    conns.remove(&addr);
                    std::thread::sleep(Duration::from_millis(100));
                    refresh(&mut slots);
                    addr = slots[slot_of(key.as_bytes()) as usize].clone();
                }
                Err(e) => {
                    log.errors += 1;
                    log.first_error.get_or_insert_with(|| e.to_string());
                    break;
                }
            }
        }
        if acked {
            log.ack(i);
        } else {
            log.unknown += 1;
        }
        i += 1;
    }
    log.elapsed_ms = started.elapsed().as_millis() as u64;
    (log, seen)
}

/// Redis Cluster's hash slot of a key (CRC16 of the key or its `{tag}`, mod 16384).
pub fn slot_of(key: &[u8]) -> u16 {
    let key = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc = 0u16;
    for &b in key {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % 16384
}
