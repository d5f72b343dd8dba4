//! A real Redis server for the state tests: Debian's `redis-server` 7 (the server binary ships
//! in `redis-tools` as `redis-check-rdb`, which runs as the server under the name
//! `redis-server`), with the two libraries it links that a slim system lacks (`liblzf1`,
//! `libjemalloc2`), fetched once with `apt-get download` and unpacked with `dpkg-deb` into
//! [`cache_dir`]`("redis")` (no system install); or the `redis-server` already on `PATH`.
//!
//! [`RedisServer::start`] runs it on a free port of 127.0.0.1 without persistence and waits
//! until it answers `PING`; [`RedisServer::restart`] kills it by PID and starts it again on the
//! same port (the tests of a server lost mid-run); dropping it kills its process by PID. A
//! machine where the packages cannot be fetched gets a [`TestkitError::RedisMissing`] that says
//! the test was not run and what to install.

use crate::error::TestkitError;
use crate::error::io_err;
use crate::{cache_dir, fetch_once};
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, TestkitError>;

/// How long the server may take to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The Debian packages the server is unpacked from.
const PACKAGES: [&str; 3] = ["redis-tools", "liblzf1", "libjemalloc2"];

/// A Redis server this process started; dropping it kills the process by its PID.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    binary: Binary,
    /// Its working directory and log; removed on drop.
    dir: tempfile::TempDir,
}

/// Where the server binary is and the libraries it needs.
#[derive(Debug, Clone)]
struct Binary {
    path: PathBuf,
    /// `LD_LIBRARY_PATH` for an unpacked binary.
    libraries: Option<PathBuf>,
}

impl RedisServer {
    /// Starts Redis on a free port of 127.0.0.1, with no snapshots and no append-only file
    /// (state outlives it only through Weir's checkpoints), and waits until it answers.
    ///
    /// # Errors
    /// [`TestkitError::RedisMissing`] when the binary cannot be found or fetched;
    /// [`TestkitError::RedisStart`] when it does not answer.
    pub fn start() -> Result<RedisServer> {
        let binary = binary()?;
        let dir = tempfile::Builder::new()
            .prefix("weir-redis-")
            .tempdir()
            .map_err(io_err("creating the Redis directory"))?;
        let port = crate::free_port()?;
        let child = spawn(&binary, dir.path(), port)?;
        let mut server = RedisServer {
            child,
            port,
            binary,
            dir,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The URL a client connects with: `redis://127.0.0.1:{port}/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server by PID (everything it held is lost, as with a machine that died) and
    /// starts a new one on the same port.
    ///
    /// # Errors
    /// As [`RedisServer::start`].
    pub fn restart(&mut self) -> Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(&self.binary, self.dir.path(), self.port)?;
        self.wait_ready()
    }

    /// Sends one command (its words as a RESP array) and returns the raw reply, for tests that
    /// look at the server without a client library.
    ///
    /// # Errors
    /// [`TestkitError::RedisStart`] when the server cannot be reached.
    pub fn command(&self, words: &[&str]) -> Result<String> {
        command(self.port, words).map_err(|detail| TestkitError::RedisStart {
            reason: format!("`{}` failed: {detail}", words.join(" ")),
            tail: self.log_tail(),
        })
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Ok(reply) = command(self.port, &["PING"])
                && reply.starts_with("+PONG")
            {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(TestkitError::RedisStart {
                    reason: format!("it exited with {status}"),
                    tail: self.log_tail(),
                });
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(TestkitError::RedisStart {
                    reason: format!("no answer to PING within {START_TIMEOUT:?}"),
                    tail: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // `Child::kill` sends SIGKILL to this child's PID only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server in `dir` on `port`.
fn spawn(binary: &Binary, dir: &Path, port: u16) -> Result<Child> {
    let (log, log_err) = crate::log_files(dir, "redis.log")?;
    let mut cmd = Command::new(&binary.path);
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    if let Some(libraries) = &binary.libraries {
        cmd.env("LD_LIBRARY_PATH", libraries);
    }
    cmd.spawn()
        .map_err(io_err(format!("running {}", binary.path.display())))
}

/// One command over a fresh connection; the reply's first line(s), raw.
fn command(port: u16, words: &[&str]) -> std::result::Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut request = format!("*{}\r\n", words.len());
    for w in words {
        request.push_str(&format!("${}\r\n{w}\r\n", w.len()));
    }
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut reply = vec![0_u8; 4096];
    let n = stream.read(&mut reply).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("the connection closed".into());
    }
    Ok(String::from_utf8_lossy(&reply[..n]).into_owned())
}

/// The server binary: `redis-server` on `PATH`, else unpacked from Debian's packages into the
/// cache.
fn binary() -> Result<Binary> {
    if let Ok(out) = Command::new("redis-server")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        && out.status.success()
    {
        return Ok(Binary {
            path: PathBuf::from("redis-server"),
            libraries: None,
        });
    }
    let cache = cache_dir("redis");
    let root = cache.join("root");
    fetch_once(&cache, &root, |work| {
        let unpacked = crate::unpack_debian_packages(work, &PACKAGES, |detail| {
            TestkitError::RedisMissing { detail }
        })?;
        // The server decides what it is by the name it runs under.
        fs::copy(
            unpacked.join("usr/bin/redis-check-rdb"),
            unpacked.join("usr/bin/redis-server"),
        )
        .map_err(io_err("naming the Redis binary redis-server"))?;
        eprintln!(
            "weir-testkit: unpacked Debian's Redis into {}",
            cache.display()
        );
        Ok(unpacked)
    })?;
    Ok(Binary {
        path: root.join("usr/bin/redis-server"),
        libraries: Some(root.join("usr/lib/x86_64-linux-gnu")),
    })
}

/// The full tier (docs/testing.md): fetches and runs Redis.
#[cfg(test)]
mod full {
    use super::*;

    #[test]
    fn redis_is_fetched_answers_and_loses_everything_on_a_restart() {
        let mut server = RedisServer::start().expect("the Redis test was not run");
        assert_eq!(server.command(&["SET", "k", "v"]).expect("set"), "+OK\r\n");
        assert_eq!(server.command(&["GET", "k"]).expect("get"), "$1\r\nv\r\n");
        let pid = server.pid();
        server.restart().expect("restarts");
        assert_ne!(server.pid(), pid, "a new process");
        assert_eq!(server.command(&["GET", "k"]).expect("get"), "$-1\r\n");
        assert!(server.url().ends_with(&format!(":{}/", server.port())));
    }
}
