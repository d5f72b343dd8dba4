//! Publishing a job manifest into the job's checkpoint storage (write, then record).

use crate::error::{HubError, Result};
use crate::store::PublishTask;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use weir::CheckpointLocation;
use weir_control::JobManifest;

/// The checkpoint storage of a job's `checkpoint` section, its `${env:NAME}` references read
/// from this process's environment as `env` allows.
///
/// # Errors
/// [`HubError::Storage`] when a reference is refused or unset, or the directory cannot be
/// opened.
pub fn storage_of(
    checkpoint: &weir::plan::CheckpointSpec,
    env: &weir::api::secrets::EnvAccess,
) -> Result<CheckpointLocation> {
    let checkpoint = checkpoint
        .resolve_env(env, &weir::plan::process_env)
        .map_err(|e| HubError::Storage {
            storage: checkpoint.dir.clone().unwrap_or_default(),
            message: e.to_string(),
        })?;
    let dir = checkpoint
        .dir
        .as_deref()
        .unwrap_or(weir::runtime::DEFAULT_CHECKPOINT_DIR);
    CheckpointLocation::from_dir_option(dir, checkpoint.s3.as_ref()).map_err(|e| {
        HubError::Storage {
            storage: dir.to_owned(),
            message: e.to_string(),
        }
    })
}

/// Writes the task's job manifest (fsynced on a local directory); returns its path as the
/// recovery record names it and its checksum.
///
/// # Errors
/// [`HubError::Storage`] when the storage refuses the write.
pub async fn write_manifest(hub: &crate::Hub, task: &PublishTask) -> Result<(String, String)> {
    let storage = hub.checkpoint_storage(&task.checkpoint)?;
    let manifest = JobManifest::seal(task.body.clone());
    let bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| HubError::Storage {
        storage: storage.display.clone(),
        message: format!("encoding the manifest: {e}"),
    })?;
    let relative = JobManifest::relative_path(&task.body.checkpoint_id);
    let location = relative
        .split('/')
        .fold(storage.base.clone(), |p: ObjectPath, part| p.join(part));
    storage
        .store
        .put(&location, PutPayload::from(bytes))
        .await
        .map_err(|e| HubError::Storage {
            storage: storage.display.clone(),
            message: format!("writing {relative}: {e}"),
        })?;
    if let Some(root) = &storage.local_root {
        let file = root.join(&relative);
        let dir = file.parent().map(std::path::Path::to_path_buf);
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            std::fs::File::open(&file)?.sync_all()?;
            if let Some(dir) = dir {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        })
        .await
        .map_err(|e| HubError::Storage {
            storage: storage.display.clone(),
            message: format!("syncing {relative}: {e}"),
        })?
        .map_err(|e| HubError::Storage {
            storage: storage.display.clone(),
            message: format!("syncing {relative}: {e}"),
        })?;
    }
    let path = format!("{}/{relative}", storage.display.trim_end_matches('/'));
    Ok((path, manifest.checksum))
}
