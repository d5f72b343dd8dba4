//! Named fail points for crash tests: `WEIR_FAILPOINT=<name>` or `<name>@<n>` makes the process
//! stop dead the `n`-th time (default the first) it reaches that point, so a test harness can
//! SIGKILL it exactly there.
//!
//! When the point is reached the process prints `weir: failpoint <name> reached` on stderr and
//! the thread that reached it blocks for ever; nothing after the point runs on that thread.
//! Without the variable a fail point costs one relaxed load. The runtime's points mark the
//! checkpoint protocol; a connector marks the points of its own commit protocol here too.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms a fail point.
pub const FAILPOINT_ENV: &str = "WEIR_FAILPOINT";

/// Every fail point there is: the runtime's, in the order an epoch meets them, then the Delta
/// sink's (in a lane of a distributed job, its epoch staged for the lanes' commit; before an
/// epoch's or the lanes' commit, after it; a merged file written before the compaction
/// commit), then the file sink's compaction (a merged file written into staging
/// before it is published; published before its inputs are deleted).
pub const FAILPOINTS: [&str; 12] = [
    "after-pre-commit",
    "after-segments",
    "after-manifest",
    "mid-commit",
    "mid-restore",
    "mid-recovery-commit",
    "delta-lane-staged",
    "delta-before-commit",
    "delta-after-commit",
    "delta-mid-compaction",
    "file-mid-merge",
    "file-after-merge",
];

struct Armed {
    name: String,
    nth: u64,
    hits: AtomicU64,
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let value = std::env::var(FAILPOINT_ENV).ok()?;
            let (name, nth) = match value.split_once('@') {
                Some((name, n)) => (name.to_owned(), n.trim().parse().unwrap_or(1)),
                None => (value.clone(), 1),
            };
            if !FAILPOINTS.contains(&name.as_str()) {
                eprintln!(
                    "warning: {FAILPOINT_ENV} names no fail point `{name}` (known: {FAILPOINTS:?})"
                );
            }
            Some(Armed {
                name,
                nth: nth.max(1),
                hits: AtomicU64::new(0),
            })
        })
        .as_ref()
}

/// Marks fail point `name`: stops the calling thread for ever if the environment armed it and
/// this is the armed hit.
pub fn failpoint(name: &str) {
    let Some(armed) = armed() else {
        return;
    };
    if armed.name != name || armed.hits.fetch_add(1, Ordering::Relaxed) + 1 != armed.nth {
        return;
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "weir: failpoint {name} reached");
    let _ = err.flush();
    drop(err);
    loop {
        std::thread::park();
    }
}
