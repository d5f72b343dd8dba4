//! A real S3-compatible server for the tests: moto's standalone server (`moto_server`), in a
//! Python virtual environment that the first test run creates under [`cache_dir`]`("moto")`.
//!
//! [`server`] starts one server per test binary on a free port of 127.0.0.1; its state lives in
//! RAM. A watchdog shell started with it holds a pipe from the test process on its standard
//! input and stops the server by its PID when that pipe closes, so the server never outlives
//! the test process, even one killed with SIGKILL. Each test creates its own bucket
//! ([`S3Server::create_bucket`], unique names). A machine without `python3` (with `venv` and
//! `pip`) gets an [`TestkitError`] naming what to install, and the tests that need the server fail.
//!
//! With [`ENDPOINT_ENV`] set (`WEIR_TEST_S3_ENDPOINT=http://127.0.0.1:8333`), [`server`] starts
//! nothing and uses the S3-compatible server already running there instead (for instance
//! SeaweedFS, started by `scripts/s3-seaweedfs.sh`); that server must accept bucket creation
//! without credentials and the tests' credentials ([`ACCESS_KEY_ID`], [`SECRET_ACCESS_KEY`]).

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

/// The environment variable naming an S3-compatible server that is already running
/// (`http://HOST:PORT`): when it is set, [`server`] uses that server and starts none.
pub const ENDPOINT_ENV: &str = "WEIR_TEST_S3_ENDPOINT";

/// How long the server may take to accept connections after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running S3-compatible server: a moto server this test binary started, or the external
/// server that [`ENDPOINT_ENV`] names.
#[derive(Debug)]
pub struct S3Server {
    host: String,
    port: u16,
    endpoint: String,
    /// The moto server this test binary started; `None` for an external server.
    started: Option<Started>,
}

/// A moto server started under its watchdog.
#[derive(Debug)]
struct Started {
    /// The server's PID, as the watchdog reported it.
    pid: u32,
    /// The write end of the watchdog's standard input: closed when the process exits, which
    /// makes the watchdog stop the server.
    _watchdog_stdin: Mutex<ChildStdin>,
    watchdog: Mutex<Child>,
}

impl S3Server {
    /// The server's URL: `http://127.0.0.1:{port}` for a moto server, the value of
    /// [`ENDPOINT_ENV`] (without a trailing `/`) for an external one.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The id of the server process this test binary started; `None` for an external server
    /// ([`ENDPOINT_ENV`]), which this process neither started nor stops.
    pub fn pid(&self) -> Option<u32> {
        self.started.as_ref().map(|s| s.pid)
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
        let mut stream = TcpStream::connect((self.host.as_str(), self.port))
            .map_err(|e| failed(format!("connecting to {}: {e}", self.endpoint)))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| failed(e.to_string()))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.host, self.port
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
/// first caller; later callers share it. With [`ENDPOINT_ENV`] set, the external server it names.
///
/// # Errors
/// [`TestkitError`] when Python is missing, the installation fails or the server does not start,
/// or when [`ENDPOINT_ENV`] is not `http://HOST:PORT` or nothing accepts connections there;
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

/// The external server when [`ENDPOINT_ENV`] is set, else a moto server, installed when needed
/// and started.
fn start() -> Result<S3Server, TestkitError> {
    match std::env::var(ENDPOINT_ENV) {
        Ok(endpoint) => external(&endpoint),
        Err(std::env::VarError::NotPresent) => start_moto(),
        Err(std::env::VarError::NotUnicode(value)) => Err(TestkitError::S3Start {
            detail: format!("{ENDPOINT_ENV}={value:?} is not UTF-8"),
        }),
    }
}

/// The external server at `endpoint` ([`ENDPOINT_ENV`]'s value), once it accepts connections.
fn external(endpoint: &str) -> Result<S3Server, TestkitError> {
    let (host, port) = parse_endpoint(endpoint).map_err(|detail| TestkitError::S3Start {
        detail: format!("{ENDPOINT_ENV}=`{endpoint}`: {detail}"),
    })?;
    if let Err(e) = TcpStream::connect((host.as_str(), port)) {
        return Err(TestkitError::S3Start {
            detail: format!(
                "nothing accepts connections at {ENDPOINT_ENV}=`{endpoint}` ({e}); start the \
                 server first (scripts/s3-seaweedfs.sh does) or unset {ENDPOINT_ENV} to use moto"
            ),
        });
    }
    Ok(S3Server {
        endpoint: format!("http://{host}:{port}"),
        host,
        port,
        started: None,
    })
}

/// The host and port of an endpoint `http://HOST:PORT` (a trailing `/` allowed); HTTPS is refused,
/// as buckets are created over plain HTTP.
fn parse_endpoint(endpoint: &str) -> Result<(String, u16), String> {
    let rest = endpoint
        .strip_prefix("http://")
        .ok_or("the endpoint must start with `http://` (HTTPS is not supported)")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or("the endpoint must name its port: `http://HOST:PORT`")?;
    if host.is_empty() || authority.contains('/') {
        return Err("the endpoint must be `http://HOST:PORT`, without a path".into());
    }
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("`{port}` is not a port"))?;
    Ok((host.to_owned(), port))
}

/// Installs moto (when needed) and starts it.
fn start_moto() -> Result<S3Server, TestkitError> {
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
    // PID, then waits for EOF on its own stdin (the test process's pipe) and stops the server
    // with SIGKILL: moto's SIGTERM handler calls `sys.exit`, which a request thread starting at
    // that moment swallows, and the server then runs on (seen under load). Its state is in
    // RAM: nothing is lost by not letting it exit cleanly.
    let script = r#"
        "$0" -H 127.0.0.1 -p "$1" >"$2" 2>&1 </dev/null &
        pid=$!
        trap 'kill -9 "$pid" 2>/dev/null' EXIT HUP INT TERM
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
        host: "127.0.0.1".into(),
        port,
        endpoint: format!("http://127.0.0.1:{port}"),
        started: Some(Started {
            pid,
            _watchdog_stdin: Mutex::new(stdin),
            watchdog: Mutex::new(watchdog),
        }),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(server);
        }
        let exited = server.started.as_ref().is_none_or(|s| {
            s.watchdog
                .lock()
                .map_or(true, |mut w| !matches!(w.try_wait(), Ok(None)))
        });
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

    /// The full tier (docs/testing.md): a moto server started by these tests.
    mod full {
        use super::*;

        /// The server of this test binary (moto, or the external one of [`ENDPOINT_ENV`]) creates
        /// buckets with distinct valid names and answers for them, and not for others.
        #[test]
        fn the_server_creates_buckets() {
            let server = server().unwrap();
            let a = server.create_bucket("Test_Bucket").unwrap();
            let b = server.create_bucket("Test_Bucket").unwrap();
            assert_ne!(a, b);
            assert!(a.starts_with("test-bucket-"), "{a}");
            assert_eq!(server.request("HEAD", &format!("/{a}")).unwrap(), 200);
            assert_eq!(server.request("HEAD", "/no-such-bucket-here").unwrap(), 404);
            // Only a server this process started has a PID, and it runs.
            match (std::env::var_os(ENDPOINT_ENV), server.pid()) {
                (None, Some(pid)) => assert!(process_alive(pid)),
                (Some(_), None) => {}
                (endpoint, pid) => panic!("{ENDPOINT_ENV}={endpoint:?} but PID {pid:?}"),
            }
        }

        /// A moto server's watchdog stops it by PID when the pipe from the test process closes
        /// (here: a server whose pipe is dropped). Moto is started whether or not
        /// [`ENDPOINT_ENV`] is set.
        #[test]
        fn the_watchdog_stops_a_moto_server() {
            let venv = install(&cache_dir("moto")).unwrap();
            let server = start_on_free_port(&venv.join("bin").join("moto_server")).unwrap();
            let pid = server.pid().unwrap();
            assert!(process_alive(pid));
            drop(server);
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

    #[test]
    fn endpoints_are_http_host_and_port() {
        assert_eq!(
            parse_endpoint("http://127.0.0.1:8333").unwrap(),
            ("127.0.0.1".to_owned(), 8333)
        );
        assert_eq!(
            parse_endpoint("http://localhost:9000/").unwrap(),
            ("localhost".to_owned(), 9000)
        );
        for bad in [
            "https://127.0.0.1:8333",
            "127.0.0.1:8333",
            "http://127.0.0.1",
            "http://:8333",
            "http://127.0.0.1:0",
            "http://127.0.0.1:port",
            "http://127.0.0.1:8333/bucket",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
    }

    /// An endpoint where nothing listens is an error naming the variable, not a hang or panic.
    #[test]
    fn an_external_endpoint_without_a_server_is_an_error() {
        // A socket bound but not listening holds the port, so no server started by a test
        // running beside this one can take it, and a connection to it is refused.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = socket.local_addr().unwrap().port();
        let err = external(&format!("http://127.0.0.1:{port}")).unwrap_err();
        assert!(err.to_string().contains(ENDPOINT_ENV), "{err}");
        let err = external("https://127.0.0.1:1").unwrap_err();
        assert!(err.to_string().contains("HTTPS"), "{err}");
    }
}
