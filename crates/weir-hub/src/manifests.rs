//! Reading manifests back from a job's checkpoint storage with their checksums checked: a job
//! manifest the Hub published, and the epoch manifest one lane's runtime published.

use crate::error::{HubError, Result};
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use weir::CheckpointLocation;
use weir::checkpoint::layout;
use weir_control::{JobManifest, ManifestView};

/// Reads the object `location` of `storage`; `Ok(None)` when there is none.
async fn read_object(
    storage: &CheckpointLocation,
    location: &ObjectPath,
) -> Result<Option<Vec<u8>>> {
    let failed = |e: &dyn std::fmt::Display| HubError::Storage {
        storage: storage.display.clone(),
        message: format!("reading {location}: {e}"),
    };
    match storage.store.get(location).await {
        Ok(got) => got
            .bytes()
            .await
            .map(|b| Some(b.to_vec()))
            .map_err(|e| failed(&e)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(failed(&e)),
    }
}

/// `relative` (a `/`-separated path) under the storage's base.
fn under_base(storage: &CheckpointLocation, relative: &str) -> ObjectPath {
    relative
        .split('/')
        .fold(storage.base.clone(), |p, part| p.join(part))
}

/// How the storage shows `location`.
fn display_path(storage: &CheckpointLocation, relative: &str) -> String {
    format!("{}/{relative}", storage.display.trim_end_matches('/'))
}

/// The job manifest of job-level checkpoint `checkpoint_id`, its recorded checksum against the
/// one of its body.
///
/// # Errors
/// 404 when the manifest is not in the storage; [`HubError::Storage`] when it cannot be read or
/// is not a job manifest.
pub async fn job_manifest(
    storage: &CheckpointLocation,
    checkpoint_id: &str,
) -> Result<ManifestView> {
    let relative = JobManifest::relative_path(checkpoint_id);
    let path = display_path(storage, &relative);
    let bytes = read_object(storage, &under_base(storage, &relative))
        .await?
        .ok_or_else(|| HubError::not_found("job manifest", &path, "checkpointId"))?;
    let manifest: JobManifest = serde_json::from_slice(&bytes).map_err(|e| HubError::Storage {
        storage: storage.display.clone(),
        message: format!("{path} is not a job manifest: {e}"),
    })?;
    let computed = manifest.body.checksum();
    let value = serde_json::to_value(&manifest).map_err(|e| HubError::Storage {
        storage: storage.display.clone(),
        message: format!("{path}: {e}"),
    })?;
    Ok(ManifestView {
        path,
        verified: computed == manifest.checksum,
        checksum: manifest.checksum,
        computed_checksum: computed,
        manifest: value,
    })
}

/// The manifest of `epoch` in checkpoint namespace `namespace` (a lane's job id), its recorded
/// checksum against the one of its bytes.
///
/// # Errors
/// 404 when there is no manifest of that epoch (never taken, or deleted by retention);
/// [`HubError::Storage`] when it cannot be read or is not a manifest.
pub async fn epoch_manifest(
    storage: &CheckpointLocation,
    namespace: &str,
    epoch: u64,
) -> Result<ManifestView> {
    let relative = layout::manifest_path(namespace, weir::api::Epoch(epoch)).to_string();
    let path = display_path(storage, &relative);
    let bytes = read_object(storage, &under_base(storage, &relative))
        .await?
        .ok_or_else(|| HubError::not_found("epoch manifest", &path, "epoch"))?;
    let not_a_manifest = |e: &dyn std::fmt::Display| HubError::Storage {
        storage: storage.display.clone(),
        message: format!("{path} is not an epoch manifest: {e}"),
    };
    let (recorded, computed) =
        weir::checkpoint::stored_checksums(&bytes, &path).map_err(|e| not_a_manifest(&e))?;
    let manifest = serde_json::from_slice(&bytes).map_err(|e| not_a_manifest(&e))?;
    Ok(ManifestView {
        path,
        verified: recorded == computed,
        checksum: recorded,
        computed_checksum: computed,
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::PutPayload;

    #[tokio::test]
    async fn an_edited_manifest_does_not_verify_and_a_missing_one_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let storage = CheckpointLocation::local(dir.path()).unwrap();
        let manifest = JobManifest::seal(weir_control::JobManifestBody {
            job_id: "j".into(),
            version_id: "v".into(),
            generation: 1,
            state_format_version: 1,
            checkpoint_id: "c1".into(),
            kind: weir_control::CheckpointKind::Checkpoint,
            savepoint_name: None,
            lane_epochs: [(0, 3)].into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            completed_at: "2026-01-01T00:00:01Z".into(),
        });
        let location = under_base(&storage, &JobManifest::relative_path("c1"));
        let put = |m: &JobManifest| PutPayload::from(serde_json::to_vec(m).unwrap());
        storage.store.put(&location, put(&manifest)).await.unwrap();
        let view = job_manifest(&storage, "c1").await.unwrap();
        assert!(view.verified, "{view:?}");
        assert_eq!(view.checksum, manifest.checksum);
        let mut edited = manifest.clone();
        edited.body.lane_epochs.insert(0, 4);
        storage.store.put(&location, put(&edited)).await.unwrap();
        let view = job_manifest(&storage, "c1").await.unwrap();
        assert!(!view.verified);
        assert_ne!(view.checksum, view.computed_checksum);
        assert!(matches!(
            job_manifest(&storage, "c2").await,
            Err(HubError::NotFound { .. })
        ));
        assert!(matches!(
            epoch_manifest(&storage, "j-lane-0", 1).await,
            Err(HubError::NotFound { .. })
        ));
    }
}
