//! `fsync` of checkpoint files on a local file system
//! ([`CheckpointStore::with_local_root`](crate::CheckpointStore::with_local_root)):
//! `object_store`'s `LocalFileSystem` writes and links files but never syncs them, so a power
//! loss after a put returned may lose them. Publishing a checkpoint is write, fsync, rename.

use crate::error::{CheckpointError, CheckpointResult};
use object_store::path::Path as ObjectPath;
use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

/// `fsync`s the files at `locations` (full object paths) under `root`, then every directory
/// from each file's parent up to `root` (each once), on tokio's blocking pool. `context` names
/// what is synced in errors (`syncing segment`).
///
/// # Errors
/// [`CheckpointError::Io`] naming the first file or directory that cannot be opened or synced
/// (a missing file included).
pub(crate) async fn sync_files(
    root: &Path,
    locations: Vec<ObjectPath>,
    context: &'static str,
) -> CheckpointResult<()> {
    if locations.is_empty() {
        return Ok(());
    }
    let root = root.to_path_buf();
    let shown = root.display().to_string();
    let task = tokio::task::spawn_blocking(move || {
        let files: Vec<PathBuf> = locations.iter().map(|l| file_path(&root, l)).collect();
        let mut directories = BTreeSet::new();
        for file in &files {
            sync(file, context)?;
            directories.extend(
                file.ancestors()
                    .skip(1)
                    .take_while(|d| d.starts_with(&root))
                    .map(Path::to_path_buf),
            );
        }
        // Deepest first: a directory's entry is durable once its parent is synced after it.
        for dir in directories.iter().rev() {
            sync_directory(dir)?;
        }
        Ok(())
    });
    // Joining fails only if the task panicked or the runtime is shutting down.
    task.await.map_err(|e| CheckpointError::Io {
        context: context.to_owned(),
        path: shown,
        source: std::io::Error::other(e),
    })?
}

/// The file `LocalFileSystem` stores `location` in: `root` joined with every path part, each
/// still percent-encoded (`LocalFileSystem` encodes parts into its file URL and decodes the URL
/// back once, which leaves the part's own encoding).
pub(crate) fn file_path(root: &Path, location: &ObjectPath) -> PathBuf {
    let mut path = root.to_path_buf();
    path.extend(location.parts().map(|p| p.as_ref().to_owned()));
    path
}

fn sync(file: &Path, context: &str) -> CheckpointResult<()> {
    let io = |source| CheckpointError::Io {
        context: context.to_owned(),
        path: file.display().to_string(),
        source,
    };
    File::open(file).map_err(io)?.sync_all().map_err(io)
}

#[cfg(unix)]
fn sync_directory(dir: &Path) -> CheckpointResult<()> {
    sync(dir, "syncing directory")
}

/// Directories cannot be opened for `fsync` outside Unix; NTFS journals its metadata.
#[cfg(not(unix))]
fn sync_directory(_dir: &Path) -> CheckpointResult<()> {
    Ok(())
}
