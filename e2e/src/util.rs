//! Small helpers every cluster-facing test shares (the e2e suite here and the operator's tests
//! against a real API server): running a command, polling until something holds, a plain GET.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a command printed.
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Panics with the command's output unless it succeeded; else its stdout.
    pub fn ok(self, what: &str) -> String {
        assert!(self.success, "{what} failed:\n{}\n{}", self.stdout, self.stderr);
        self.stdout
    }
}

/// Runs `cmd` to completion, feeding it `stdin` if given.
pub fn run(cmd: &mut Command, stdin: Option<&str>) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("running {cmd:?}: {e} (is it on PATH?)"));
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Output {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Polls `check` every 250 ms until it returns Some, or panics after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `GET path` on 127.0.0.1:`port`: (status code, body).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let code = raw.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default()))
}
