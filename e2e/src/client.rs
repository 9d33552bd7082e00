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
