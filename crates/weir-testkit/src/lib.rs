//! Real servers for Weir's tests, started by the tests themselves and stopped by PID.
//!
//! Tests never talk to mocks where the real component runs on this machine. What a server needs
//! (jars, Python packages) is fetched once from the package registries into a cache directory
//! ([`cache_dir`]) that outlives the test run, so later runs start without the network.

pub mod browser;
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
