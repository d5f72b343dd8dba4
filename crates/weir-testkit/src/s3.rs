//! A real S3-compatible server for the tests: moto's standalone server (`moto_server`), in a
//! Python virtual environment that the first test run creates under [`cache_dir`]`("moto")`.
//!
//! [`server`] starts one server per test binary on a free port of 127.0.0.1; its state lives in
//! RAM. A watchdog shell started with it holds a pipe from the test process on its standard
//! input and stops the server by its PID when that pipe closes, so the server never outlives
//! the test process, even one killed with SIGKILL. Each test creates its own bucket
//! ([`S3Server::create_bucket`], unique names). A machine without `python3` (with `venv` and
//! `pip`) gets an [`TestkitError`] naming what to install, and the tests that need the server fail.

use crate::{cache_dir, unique_name};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use crate::error::TestkitError;
use std::time::{Duration, Instant};

/// The Python packages of the server, pinned: moto's S3 backend and the web server it needs.
pub const PACKAGES: [&str; 3] = ["moto[s3]==5.2.5", "flask==3.1.3", "flask-cors==6.0.5"];

/// The access key id the tests use (moto accepts any credentials).
pub const ACCESS_KEY_ID: &str = "weir-test";
/// The secret access key the tests use.
pub const SECRET_ACCESS_KEY: &str = "weir-test-secret";
/// The region the tests use.
pub const REGION: &str = "us-east-1";

/// How long the server may take to accept connections after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running moto server.
#[derive(Debug)]
pub struct S3Server {
    port: u16,
    endpoint: String,
    /// The server's PID, as the watchdog reported it.
    pid: u32,
    /// The write end of the watchdog's standard input: closed when the process exits, which
    /// makes the watchdog stop the server.
    _watchdog_stdin: Mutex<ChildStdin>,
    _watchdog: Mutex<Child>,
}

impl S3Server {
    /// The server's URL, `http://127.0.0.1:{port}`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Creates a bucket no other test uses (`prefix`, then [`unique_name`]'s suffix, lowercase)
    /// and returns its name.
    ///
    /// # Errors
    /// [`TestkitError::S3Request`] when the server refuses or cannot be reached.
    pub fn create_bucket(&self, prefix: &str) -> Result<String, TestkitError> {
        let mut name = unique_name(&prefix.to_ascii_lowercase()).replace(['_', '.'], "-");
        name.truncate(63);
        let name = name.trim_end_matches('-').to_owned();
        let status = self.request("PUT", &format!("/{name}"))?;
        if status != 200 {
            return Err(TestkitError::S3Request {
                request: format!("PUT /{name}"),
                detail: format!("HTTP status {status}"),
            });
        }
        Ok(name)
    }

    /// Sends a request without a body and returns the response's status code.
    fn request(&self, method: &str, path: &str) -> Result<u16, TestkitError> {
        let failed = |detail: String| TestkitError::S3Request {
            request: format!("{method} {path}"),
            detail,
        };
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))
            .map_err(|e| failed(format!("connecting: {e}")))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| failed(e.to_string()))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        )
        .map_err(|e| failed(format!("sending: {e}")))?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .map_err(|e| failed(format!("reading the response: {e}")))?;
        let text = String::from_utf8_lossy(&response);
        let status_line = text.lines().next().unwrap_or_default().to_owned();
        status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| failed(format!("unexpected response `{status_line}`")))
    }
}

/// The server of this test binary, started (and installed, on first use on this machine) by the
/// first caller; later callers share it.
///
/// # Errors
/// [`TestkitError`] when Python is missing, the installation fails or the server does not start;
/// every later call returns the same error.
pub fn server() -> Result<&'static S3Server, TestkitError> {
    static SERVER: OnceLock<Result<S3Server, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| start().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|message| TestkitError::Shared {
            server: "S3 server",
            message: message.clone(),
        })
}

/// Installs (when needed) and starts the server.
fn start() -> Result<S3Server, TestkitError> {
    let venv = install(&cache_dir("moto"))?;
    let program = venv.join("bin").join("moto_server");
    let mut last = None;
    // A free port is found by binding port 0 and releasing it; another process may take it
    // before the server binds it, so try a few.
    for _ in 0..3 {
        match start_on_free_port(&program) {
            Ok(server) => return Ok(server),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| TestkitError::S3Start {
        detail: "no attempt made".into(),
    }))
}

/// Creates the virtual environment under `cache` and installs [`PACKAGES`] unless an earlier
/// run did; an exclusive lock on `cache/install.lock` keeps two test binaries from installing
/// at once. Returns the environment's directory.
fn install(cache: &Path) -> Result<PathBuf, TestkitError> {
    let venv = cache.join("venv");
    let failed = |step: &str, detail: String| TestkitError::S3Install {
        dir: venv.display().to_string(),
        step: step.to_owned(),
        detail,
    };
    fs::create_dir_all(cache).map_err(|e| failed("creating the cache directory", e.to_string()))?;
    let lock = File::create(cache.join("install.lock"))
        .map_err(|e| failed("creating the lock file", e.to_string()))?;
    lock.lock()
        .map_err(|e| failed("locking the cache", e.to_string()))?;
    // What the marker says is installed; a different pin list installs again.
    let marker = venv.join(".weir-installed");
    let wanted = PACKAGES.join(" ");
    if fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        return Ok(venv);
    }
    if venv.exists() {
        fs::remove_dir_all(&venv)
            .map_err(|e| failed("removing an incomplete environment", e.to_string()))?;
    }
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| TestkitError::S3Missing {
            what: "python3".into(),
            detail: format!("running `python3 -m venv`: {e}"),
        })?;
    if !created.status.success() {
        return Err(TestkitError::S3Missing {
            what: "Python's venv module with ensurepip (python3-venv)".into(),
            detail: format!(
                "`python3 -m venv` failed: {}",
                String::from_utf8_lossy(&created.stderr).trim()
            ),
        });
    }
    let pip = venv.join("bin").join("pip");
    let installed = Command::new(&pip)
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(PACKAGES)
        .output()
        .map_err(|e| TestkitError::S3Missing {
            what: "pip in the virtual environment (python3-pip)".into(),
            detail: format!("running `{}`: {e}", pip.display()),
        })?;
    if !installed.status.success() {
        return Err(failed(
            &format!("pip install {wanted}"),
            String::from_utf8_lossy(&installed.stderr).trim().to_owned(),
        ));
    }
    fs::write(&marker, &wanted).map_err(|e| failed("writing the marker", e.to_string()))?;
    Ok(venv)
}

/// Starts `program` on a port that was free a moment ago, under the watchdog, and waits until
/// it accepts connections.
fn start_on_free_port(program: &Path) -> Result<S3Server, TestkitError> {
    let failed = |detail: String| TestkitError::S3Start { detail };
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| failed(format!("finding a free port: {e}")))?
        .port();
    // One log per test binary, overwritten by its next run.
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tests".into());
    let log = cache_dir("moto").join(format!("server-{binary}.log"));
    // The watchdog: starts the server in the background (its stdin is /dev/null), prints its
    // PID, then waits for EOF on its own stdin (the test process's pipe) and stops the server.
    let script = r#"
        "$0" -H 127.0.0.1 -p "$1" >"$2" 2>&1 </dev/null &
        pid=$!
        trap 'kill "$pid" 2>/dev/null' EXIT HUP INT TERM
        echo "$pid"
        cat >/dev/null
    "#;
    let mut watchdog = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(program)
        .arg(port.to_string())
        .arg(&log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| failed(format!("running sh: {e}")))?;
    let stdin = watchdog.stdin.take();
    let pid = read_pid(&mut watchdog);
    let (Some(stdin), Ok(pid)) = (stdin, pid) else {
        let _ = watchdog.kill();
        let _ = watchdog.wait();
        return Err(failed(
            "the watchdog did not report the server's PID".into(),
        ));
    };
    let server = S3Server {
        port,
        endpoint: format!("http://127.0.0.1:{port}"),
        pid,
        _watchdog_stdin: Mutex::new(stdin),
        _watchdog: Mutex::new(watchdog),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(server);
        }
        let exited = server
            ._watchdog
            .lock()
            .map_or(true, |mut w| !matches!(w.try_wait(), Ok(None)));
        if exited || Instant::now() > deadline || !process_alive(pid) {
            let tail = fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            drop(server); // closes the pipe: the watchdog stops the server
            return Err(failed(format!(
                "`{}` on port {port} did not accept connections; its log `{}` ends with:\n{}",
                program.display(),
                log.display(),
                tail.join("\n")
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads the server PID the watchdog prints first.
fn read_pid(watchdog: &mut Child) -> Result<u32, ()> {
    let mut out = watchdog.stdout.take().ok_or(())?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).map_err(|_| ())? == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    String::from_utf8_lossy(&line)
        .trim()
        .parse()
        .map_err(|_| ())
}

/// Whether process `pid` still exists (it has a `/proc` entry that is not a zombie).
fn process_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The server starts, creates buckets, and its watchdog stops it by PID when the pipe from
    /// the test process closes (here: a second server whose pipe is dropped).
    #[test]
    fn the_server_runs_and_its_watchdog_stops_it() {
        let server = server().unwrap();
        let a = server.create_bucket("Test_Bucket").unwrap();
        let b = server.create_bucket("Test_Bucket").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("test-bucket-"), "{a}");
        assert_eq!(server.request("HEAD", &format!("/{a}")).unwrap(), 200);
        assert_eq!(server.request("HEAD", "/no-such-bucket-here").unwrap(), 404);
        assert!(process_alive(server.pid()));

        let program = cache_dir("moto").join("venv/bin/moto_server");
        let second = start_on_free_port(&program).unwrap();
        let pid = second.pid();
        assert!(process_alive(pid));
        drop(second);
        let deadline = Instant::now() + Duration::from_secs(30);
        while process_alive(pid) {
            assert!(
                Instant::now() < deadline,
                "the server {pid} outlived its pipe"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
