//! Real servers for Weir's tests, started by the tests themselves and stopped by PID.
//!
//! Tests never talk to mocks where the real component runs on this machine. What a server needs
//! (jars, Python packages) is fetched once from the package registries into a cache directory
//! ([`cache_dir`]) that outlives the test run, so later runs start without the network.

pub mod browser;
pub mod delta_readers;
mod error;
pub mod kafka;
pub mod prometheus;
pub mod redis;
pub mod s3;

pub use error::TestkitError;

use error::io_err;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The cache directory `name` of the test servers: under `CARGO_TARGET_DIR` when set (so a
/// warm target directory keeps its downloads), else under the workspace's `target/`.
pub fn cache_dir(name: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    base.join("weir-testkit").join(name)
}

/// Puts something into the cache once and returns its path: `target` when it exists;
/// otherwise, under an exclusive lock on `cache/fetch.lock` (two test binaries never fetch at
/// once) and after looking again, `fetch` fills a fresh temporary directory inside `cache` and
/// returns what it staged there, which is renamed to `target` whole, so a half-finished fetch is
/// never used.
pub(crate) fn fetch_once(
    cache: &Path,
    target: &Path,
    fetch: impl FnOnce(&Path) -> Result<PathBuf, TestkitError>,
) -> Result<PathBuf, TestkitError> {
    if target.exists() {
        return Ok(target.to_path_buf());
    }
    fs::create_dir_all(cache).map_err(io_err(format!("creating {}", cache.display())))?;
    let lock_path = cache.join("fetch.lock");
    let lock = fs::File::create(&lock_path)
        .map_err(io_err(format!("creating {}", lock_path.display())))?;
    lock.lock()
        .map_err(io_err(format!("locking {}", lock_path.display())))?;
    if target.exists() {
        return Ok(target.to_path_buf());
    }
    let work = tempfile::Builder::new()
        .prefix("fetch-")
        .tempdir_in(cache)
        .map_err(io_err(format!(
            "creating a directory in {}",
            cache.display()
        )))?;
    let staged = fetch(work.path())?;
    fs::rename(&staged, target).map_err(io_err(format!(
        "moving {} to {}",
        staged.display(),
        target.display()
    )))?;
    Ok(target.to_path_buf())
}

/// Downloads Debian's `packages` into `work` with `apt-get download` and unpacks them all with
/// `dpkg-deb -x` into `work/root`, which it returns (no system install). `missing` makes the
/// error of a step that fails: the caller's "test was not run" error.
pub(crate) fn unpack_debian_packages(
    work: &Path,
    packages: &[&str],
    missing: fn(String) -> TestkitError,
) -> Result<PathBuf, TestkitError> {
    let list = packages.join(" ");
    fetch_step(
        std::process::Command::new("apt-get")
            .arg("download")
            .args(packages)
            .current_dir(work),
        &format!("apt-get download {list}"),
        missing,
    )?;
    let debs: Vec<PathBuf> = fs::read_dir(work)
        .map_err(io_err(format!("listing {}", work.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    if debs.len() < packages.len() {
        return Err(missing(format!(
            "apt-get download {list} left {} of the {} packages",
            debs.len(),
            packages.len()
        )));
    }
    let root = work.join("root");
    for deb in debs {
        fetch_step(
            std::process::Command::new("dpkg-deb")
                .arg("-x")
                .arg(&deb)
                .arg(&root),
            &format!("dpkg-deb -x {}", deb.display()),
            missing,
        )?;
    }
    Ok(root)
}

/// Runs one step of fetching a server; a failure is `missing` (the server could not be had).
fn fetch_step(
    cmd: &mut std::process::Command,
    name: &str,
    missing: fn(String) -> TestkitError,
) -> Result<(), TestkitError> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| missing(format!("{name} could not be run: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(missing(format!(
        "{name} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// A port on 127.0.0.1 that nothing listens on now, for a server the tests start.
pub(crate) fn free_port() -> Result<u16, TestkitError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(io_err("binding a free port on 127.0.0.1"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(io_err("reading the free port"))
}

/// A log file `dir/name` for a server's stdout and a second handle on it for its stderr.
pub(crate) fn log_files(dir: &Path, name: &str) -> Result<(fs::File, fs::File), TestkitError> {
    let path = dir.join(name);
    let log = fs::File::create(&path).map_err(io_err(format!("creating {}", path.display())))?;
    let log_err = log
        .try_clone()
        .map_err(io_err(format!("opening {}", path.display())))?;
    Ok((log, log_err))
}

/// A name no other test of this process (nor of an earlier run) uses: `prefix`, the process id,
/// a counter and the time, for topics, groups, transactional ids and buckets.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{n}-{nanos}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_caches_named() {
        let a = unique_name("t");
        let b = unique_name("t");
        assert_ne!(a, b);
        assert!(a.starts_with("t-"));
        assert!(cache_dir("kafka").ends_with("weir-testkit/kafka"));
    }
}
