//! Helpers for tests that run the real `thinwan-mux` binary: a daemon with JSON logs
//! whose bound addresses are read back from its log (configs use `127.0.0.1:0`), its
//! RSS, a scratch directory, and an in-process echo server.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const BIN: &str = env!("CARGO_BIN_EXE_thinwan-mux");
pub const PSK: &str = "soak-test-psk-0123456789";

/// A fresh directory under cargo's per-target scratch space.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `thinwan-mux ARGS` to completion: (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), s(&out.stdout), s(&out.stderr))
}

/// A running daemon; killed (SIGKILL) when dropped if still running.
pub struct Daemon {
    pub child: Child,
    /// Every JSON log line so far.
    pub log: Arc<Mutex<Vec<Value>>>,
}

impl Daemon {
    /// Start `thinwan-mux ROLE --config CONFIG`; the config must set `[log] format = "json"`.
    pub fn start(role: &str, config: &Path) -> Daemon {
        let mut child = Command::new(BIN)
            .args([role, "--config", config.to_str().unwrap()])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stderr, l) = (child.stderr.take().unwrap(), log.clone());
        // Drained on a thread: a full pipe would block the daemon's logging.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                let v = serde_json::from_str(&line).unwrap_or(Value::String(line));
                l.lock().unwrap().push(v);
            }
        });
        Daemon { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The field `field` of the first log line with message `msg` (waits up to 10 s).
    pub fn wait_for(&self, msg: &str, field: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(v) = self.lines(msg).first() {
                return v["fields"][field].as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
            }
            assert!(Instant::now() < deadline, "no log line {msg:?}; log: {:?}", self.log.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Address logged as `listen` with message `msg`.
    pub fn addr(&self, msg: &str) -> SocketAddr {
        self.wait_for(msg, "listen").parse().unwrap()
    }

    /// Log lines with message `msg`.
    pub fn lines(&self, msg: &str) -> Vec<Value> {
        self.log.lock().unwrap().iter().filter(|v| v["fields"]["message"] == msg).cloned().collect()
    }

    /// How many WARN lines were logged so far.
    pub fn warn_count(&self) -> usize {
        self.log.lock().unwrap().iter().filter(|v| v["level"] == "WARN").count()
    }

    /// Resident set size, kB (`VmRSS` in /proc/PID/status).
    pub fn rss_kb(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Open file descriptors.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// SIGTERM and wait (graceful shutdown), up to 10 s.
    pub fn stop(mut self) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Write a config file `name` in `dir` and return its path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A core config (PSK, JSON logs) listening on an ephemeral port, target `echo` at `echo`.
pub fn core_config(echo: SocketAddr, extra: &str) -> String {
    format!(
        "[trunk]\nlisten = \"127.0.0.1:0\"\n[auth]\npsk = \"{PSK}\"\n[log]\nformat = \"json\"\n{extra}\n\
         [[target]]\nname = \"echo\"\nconnect = \"{echo}\"\n"
    )
}

/// An edge config (PSK, JSON logs) for `core`, forwarding `echo` on an ephemeral port.
pub fn edge_config(core: SocketAddr, extra: &str) -> String {
    format!(
        "[trunk]\nconnect = \"{core}\"\n[auth]\npsk = \"{PSK}\"\n[log]\nformat = \"json\"\n{extra}\n\
         [[forward]]\nname = \"echo\"\nlisten = \"127.0.0.1:0\"\n"
    )
}

/// An echo server in this process.
pub async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

/// Send `data` through `addr` (an edge forward to the echo target) and check the echo.
pub async fn echo_once(addr: SocketAddr, data: &[u8]) -> std::io::Result<()> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(data).await?;
    s.shutdown().await?;
    let mut got = Vec::new();
    s.read_to_end(&mut got).await?;
    if got != data {
        return Err(std::io::Error::other(format!("echo returned {} of {} bytes", got.len(), data.len())));
    }
    Ok(())
}

/// [`echo_once`] until it succeeds (the edge's lanes may still be connecting), up to `within`.
pub async fn echo_eventually(addr: SocketAddr, data: &[u8], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout(Duration::from_secs(3), echo_once(addr, data)).await {
            Ok(Ok(())) => return,
            r if Instant::now() > deadline => panic!("no echo through the tunnel within {within:?}: {r:?}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
