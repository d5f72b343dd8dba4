//! A real headless browser for the workbench's tests: Debian's Chromium (`/usr/bin/chromium`)
//! driven through its chromedriver (`/usr/bin/chromedriver`) with the [`fantoccini`] WebDriver
//! client, over plain HTTP on 127.0.0.1.
//!
//! When the two binaries are missing and the tests run as root, they are installed once with
//! `apt-get install -y --no-install-recommends chromium chromium-driver`, under an exclusive
//! lock on [`cache_dir`]`("browser")/install.lock` so that two test binaries never run apt at
//! once. A machine where they cannot be had gets a [`TestkitError::BrowserMissing`] that says
//! the test was NOT RUN and what to install.
//!
//! [`Browser::start`] runs chromedriver on a free port (by PID), waits until it is ready and
//! opens a session of headless Chromium (1440x900); dropping the browser ends the session (which
//! quits Chromium) and kills chromedriver by its PID.

use crate::cache_dir;
use crate::error::{TestkitError, io_err};
use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder, Locator};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, TestkitError>;

/// Debian's Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's chromedriver (package `chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The window size of the sessions and of their screenshots.
pub const WINDOW: (u32, u32) = (1440, 900);
/// How long chromedriver may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A headless Chromium session and the chromedriver this process started for it.
pub struct Browser {
    client: Client,
    driver: Driver,
    port: u16,
    session: Option<String>,
    /// chromedriver's log; removed on drop.
    _dir: tempfile::TempDir,
}

/// The chromedriver process; dropping it kills it by its PID and reaps it.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        // `Child::kill` sends SIGKILL to this child's PID only.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("chromedriver_pid", &self.driver.0.id())
            .field("port", &self.port)
            .field("session", &self.session)
            .finish()
    }
}

impl Browser {
    /// Finds (or installs) Chromium and chromedriver, starts chromedriver and opens a headless
    /// session with `--headless=new --no-sandbox --disable-gpu --window-size=1440,900`.
    ///
    /// # Errors
    /// [`TestkitError::BrowserMissing`] when the binaries cannot be had;
    /// [`TestkitError::BrowserStart`] when chromedriver or the session does not start.
    pub async fn start() -> Result<Browser> {
        let (chromium, chromedriver) = binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("weir-browser-")
            .tempdir()
            .map_err(io_err("creating the browser directory"))?;
        let port = crate::free_port()?;
        let (log, log_err) = crate::log_files(dir.path(), "chromedriver.log")?;
        let mut driver = Driver(
            Command::new(&chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log_err)
                .spawn()
                .map_err(io_err(format!("running {}", chromedriver.display())))?,
        );
        // Until the Browser exists, an early return drops `driver`, which kills chromedriver.
        let fail = |reason: String| TestkitError::BrowserStart {
            reason,
            tail: log_tail(dir.path()),
        };
        let started = Instant::now();
        loop {
            let ready = ureq::get(&format!("http://127.0.0.1:{port}/status"))
                .timeout(Duration::from_secs(5))
                .call()
                .ok()
                .and_then(|a| a.into_string().ok())
                .is_some_and(|body| body.contains("\"ready\":true"));
            if ready {
                break;
            }
            if let Some(status) = driver.0.try_wait().ok().flatten() {
                return Err(fail(format!("chromedriver exited ({status})")));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(fail(format!(
                    "chromedriver not ready after {START_TIMEOUT:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut caps = Capabilities::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium.display().to_string(),
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    format!("--window-size={},{}", WINDOW.0, WINDOW.1),
                    "--hide-scrollbars",
                    "--force-device-scale-factor=1",
                ],
            }),
        );
        // The page's console messages, read by `console_errors`.
        caps.insert(
            "goog:loggingPrefs".into(),
            serde_json::json!({ "browser": "ALL" }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .map_err(|e| fail(format!("opening a Chromium session: {e}")))?;
        let session = client.session_id().await.ok().flatten();
        // `--window-size` sizes the window, whose frame takes part of it: grow the window so
        // that the page (and every screenshot) gets exactly WINDOW.
        let frame = client
            .execute(
                "return [window.outerWidth - window.innerWidth, \
                 window.outerHeight - window.innerHeight];",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| serde_json::from_value::<(u32, u32)>(v).ok())
            .unwrap_or((0, 0));
        if frame != (0, 0)
            && let Err(e) = client
                .set_window_size(WINDOW.0 + frame.0, WINDOW.1 + frame.1)
                .await
        {
            // Ends the session (Chromium quits) before chromedriver is killed.
            let _ = client.close().await;
            return Err(fail(format!("sizing the window: {e}")));
        }
        Ok(Browser {
            client,
            driver,
            port,
            session,
            _dir: dir,
        })
    }

    /// The WebDriver client of the session.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// chromedriver's process id.
    pub fn driver_pid(&self) -> u32 {
        self.driver.0.id()
    }

    /// Opens `url`.
    ///
    /// # Errors
    /// [`TestkitError::Browser`] when the navigation fails.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.client
            .goto(url)
            .await
            .map_err(|e| cmd_err(format!("goto {url}"), e))
    }

    /// Waits up to `timeout` for an element matching the CSS `selector`.
    ///
    /// # Errors
    /// [`TestkitError::Browser`] when none appears in time.
    pub async fn wait_for(
        &self,
        selector: &str,
        timeout: Duration,
    ) -> Result<fantoccini::elements::Element> {
        self.client
            .wait()
            .at_most(timeout)
            .every(Duration::from_millis(100))
            .for_element(Locator::Css(selector))
            .await
            .map_err(|e| cmd_err(format!("wait for `{selector}`"), e))
    }

    /// Saves a PNG screenshot of the window to `path` (its directory is created).
    ///
    /// # Errors
    /// [`TestkitError::Browser`] or [`TestkitError::Io`].
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let png = self
            .client
            .screenshot()
            .await
            .map_err(|e| cmd_err(format!("screenshot {}", path.display()), e))?;
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
        }
        fs::write(path, png).map_err(io_err(format!("writing {}", path.display())))
    }

    /// The page's console messages of level SEVERE since the last call (uncaught exceptions,
    /// `console.error`, failed loads), as chromedriver's log endpoint gives them.
    ///
    /// # Errors
    /// [`TestkitError::Browser`] when chromedriver refuses the request.
    pub fn console_errors(&self) -> Result<Vec<String>> {
        let Some(session) = &self.session else {
            return Ok(Vec::new());
        };
        let command = "POST /session/{id}/se/log".to_owned();
        let answer = ureq::post(&format!(
            "http://127.0.0.1:{}/session/{session}/se/log",
            self.port
        ))
        .timeout(Duration::from_secs(10))
        .send_string(r#"{"type":"browser"}"#)
        .map_err(|e| TestkitError::Browser {
            command: command.clone(),
            detail: e.to_string(),
        })?
        .into_string()
        .map_err(|e| TestkitError::Browser {
            command: command.clone(),
            detail: e.to_string(),
        })?;
        let body: serde_json::Value =
            serde_json::from_str(&answer).map_err(|e| TestkitError::Browser {
                command,
                detail: format!("{e}: {answer}"),
            })?;
        Ok(body["value"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session quits Chromium; then chromedriver goes, by its PID.
        if let Some(session) = &self.session {
            let _ = ureq::delete(&format!("http://127.0.0.1:{}/session/{session}", self.port))
                .timeout(Duration::from_secs(10))
                .call();
        }
        // Then chromedriver is asked to exit, which lets it reap Chromium; whatever still runs
        // after a few seconds is killed by its PID when `driver` is dropped.
        let _ = ureq::get(&format!("http://127.0.0.1:{}/shutdown", self.port))
            .timeout(Duration::from_secs(5))
            .call();
        let asked = Instant::now();
        while asked.elapsed() < Duration::from_secs(3)
            && self.driver.0.try_wait().ok().flatten().is_none()
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn cmd_err(command: String, e: fantoccini::error::CmdError) -> TestkitError {
    TestkitError::Browser {
        command,
        detail: e.to_string(),
    }
}

fn log_tail(dir: &Path) -> String {
    let log = fs::read_to_string(dir.join("chromedriver.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Chromium and chromedriver: Debian's, installed with apt-get when missing and running as root.
fn binaries() -> Result<(PathBuf, PathBuf)> {
    let chromium = PathBuf::from(CHROMIUM);
    let chromedriver = PathBuf::from(CHROMEDRIVER);
    let present = || chromium.exists() && chromedriver.exists();
    if present() {
        return Ok((chromium, chromedriver));
    }
    let missing = |detail: String| TestkitError::BrowserMissing { detail };
    if !is_root() {
        return Err(missing(format!(
            "{CHROMIUM} or {CHROMEDRIVER} is missing and the tests do not run as root"
        )));
    }
    let cache = cache_dir("browser");
    fs::create_dir_all(&cache).map_err(io_err(format!("creating {}", cache.display())))?;
    let lock_path = cache.join("install.lock");
    let lock = fs::File::create(&lock_path)
        .map_err(io_err(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(io_err(format!("locking {}", lock_path.display())))?;
    if present() {
        return Ok((chromium, chromedriver));
    }
    eprintln!("weir-testkit: installing Debian's chromium and chromium-driver with apt-get");
    let install = || {
        apt(&[
            "install",
            "-y",
            "--no-install-recommends",
            "chromium",
            "chromium-driver",
        ])
    };
    if let Err(first) = install() {
        // Stale or missing package lists: refresh them once and try again.
        apt(&["update"]).map_err(|e| missing(format!("{first}; then {e}")))?;
        install().map_err(missing)?;
    }
    if present() {
        Ok((chromium, chromedriver))
    } else {
        Err(missing(format!(
            "apt-get installed the packages but {CHROMIUM} or {CHROMEDRIVER} is still missing"
        )))
    }
}

/// Runs `apt-get args`; the error is its output's end.
fn apt(args: &[&str]) -> std::result::Result<(), String> {
    let out = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("apt-get {} could not be run: {e}", args.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    Err(format!(
        "apt-get {} failed ({}): {}",
        args.join(" "),
        out.status,
        lines[lines.len().saturating_sub(5)..].join(" / ")
    ))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
