//! A real Prometheus server for the metrics tests: the binary of Debian's `prometheus` package,
//! fetched once with `apt-get download` and unpacked with `dpkg-deb` into
//! [`cache_dir`]`("prometheus")` (no system install), or the `prometheus` already on `PATH`.
//!
//! [`PrometheusServer::start`] runs it on a free port of 127.0.0.1, scraping the given targets
//! every second, and waits until it is ready; dropping the server kills its process by PID.
//! A machine where the package cannot be fetched gets a [`TestkitError::PrometheusMissing`]
//! that says the test was not run and what to install.

use crate::error::TestkitError;
use crate::error::io_err;
use crate::{cache_dir, fetch_once};
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, TestkitError>;

/// How long the server may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A Prometheus server this process started; dropping it kills the process by its PID.
#[derive(Debug)]
pub struct PrometheusServer {
    child: Child,
    port: u16,
    /// The configuration, the log and the TSDB; removed on drop.
    dir: tempfile::TempDir,
}

impl PrometheusServer {
    /// Starts Prometheus scraping `targets` (`HOST:PORT`, path `/metrics`) every second, with
    /// the targets' own `job` labels kept (`honor_labels`), and waits until it is ready and has
    /// taken up every target (a target need not be listening yet).
    ///
    /// # Errors
    /// [`TestkitError::PrometheusMissing`] when the binary cannot be found or fetched;
    /// [`TestkitError::PrometheusStart`] when it does not become ready.
    pub fn start(targets: &[String]) -> Result<PrometheusServer> {
        let binary = binary()?;
        let dir = tempfile::Builder::new()
            .prefix("weir-prometheus-")
            .tempdir()
            .map_err(io_err("creating the Prometheus directory"))?;
        let config = dir.path().join("prometheus.yml");
        let quoted: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        fs::write(
            &config,
            format!(
                "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\n\
                 scrape_configs:\n  - job_name: weir\n    honor_labels: true\n    \
                 static_configs: [{{ targets: [{}] }}]\n",
                quoted.join(", ")
            ),
        )
        .map_err(io_err(format!("writing {}", config.display())))?;
        let port = crate::free_port()?;
        let (log, log_err) = crate::log_files(dir.path(), "prometheus.log")?;
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(io_err(format!("running {}", binary.display())))?;
        let mut server = PrometheusServer { child, port, dir };
        server.wait_ready(targets)?;
        Ok(server)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Evaluates `promql` now (`GET /api/v1/query`) and returns the JSON body of the answer.
    ///
    /// # Errors
    /// [`TestkitError::PrometheusRequest`] when the server cannot be reached or refuses.
    pub fn query(&self, promql: &str) -> Result<String> {
        self.get("/api/v1/query", &[("query", promql)])
    }

    /// `GET path?query`: the body of a 2xx answer.
    fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<String> {
        let failed = |detail: String| TestkitError::PrometheusRequest {
            request: path.to_owned(),
            detail,
        };
        let mut request = ureq::get(&format!("http://127.0.0.1:{}{path}", self.port))
            .timeout(Duration::from_secs(30));
        for (name, value) in query {
            request = request.query(name, value);
        }
        let answer = match request.call() {
            Ok(answer) => answer,
            Err(ureq::Error::Status(status, answer)) => {
                let body = answer.into_string().unwrap_or_default();
                return Err(failed(format!("HTTP status {status}: {body}")));
            }
            Err(e) => return Err(failed(e.to_string())),
        };
        answer
            .into_string()
            .map_err(|e| failed(format!("reading the body: {e}")))
    }

    /// Waits until the server is ready and scrapes every target: its discovery hands new
    /// targets to the scrapers only every few seconds, so a scrape of a short job would
    /// otherwise miss most of it.
    fn wait_ready(&mut self, targets: &[String]) -> Result<()> {
        let started = Instant::now();
        loop {
            if self.get("/-/ready", &[]).is_ok()
                && let Ok(active) = self.get("/api/v1/targets", &[("state", "active")])
                && targets
                    .iter()
                    .all(|t| active.contains(&format!("\"scrapeUrl\":\"http://{t}/metrics\"")))
            {
                return Ok(());
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || started.elapsed() > START_TIMEOUT {
                let reason = match exited {
                    Some(status) => format!("it exited ({status})"),
                    None => format!("not ready after {START_TIMEOUT:?}"),
                };
                let log =
                    fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                return Err(TestkitError::PrometheusStart {
                    reason,
                    tail: lines[lines.len().saturating_sub(20)..].join("\n"),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        // `Child::kill` sends SIGKILL to this child's PID only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `prometheus` binary: on `PATH`, else unpacked from Debian's package into the cache.
fn binary() -> Result<PathBuf> {
    if let Ok(out) = Command::new("prometheus")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        && out.status.success()
    {
        return Ok(PathBuf::from("prometheus"));
    }
    let cache = cache_dir("prometheus");
    let binary = cache.join("prometheus");
    fetch_once(&cache, &binary, |work| {
        let unpacked = crate::unpack_debian_packages(work, &["prometheus"], |detail| {
            TestkitError::PrometheusMissing { detail }
        })?;
        let staged = work.join("prometheus");
        fs::copy(unpacked.join("usr/bin/prometheus"), &staged)
            .map_err(io_err("copying usr/bin/prometheus out of the package"))?;
        eprintln!(
            "weir-testkit: unpacked Debian's prometheus into {}",
            cache.display()
        );
        Ok(staged)
    })
}

/// The full tier (docs/testing.md): fetches and runs Prometheus.
#[cfg(test)]
mod full {
    use super::*;

    /// Whether `path` is a Prometheus binary that runs.
    fn runs(path: &std::path::Path) -> bool {
        Command::new(path)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    #[test]
    fn prometheus_binary_is_fetched_and_runs() {
        let binary = binary().expect("the Prometheus test was not run");
        assert!(runs(&binary), "{} does not run", binary.display());
    }
}
