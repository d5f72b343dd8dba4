//! Where a Delta table lives (its object store and URL) and opening or creating it.

use deltalake_core::kernel::StructType;
use deltalake_core::kernel::transaction::CommitProperties;
use deltalake_core::logstore::{LogStore, LogStoreFactory, StorageConfig, default_logstore};
use deltalake_core::{DeltaTable, DeltaTableBuilder, DeltaTableError, TableProperty};
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use std::sync::Arc;
use url::Url;
use weir_api::{Error, Result, S3Options};

/// A table's place: the store whose root is the file system's or bucket's root, and the
/// table's URL in it, as delta-rs takes them.
#[derive(Debug, Clone)]
pub(crate) struct TableLocation {
    store: Arc<dyn ObjectStore>,
    url: Url,
    /// How the user wrote the path, for messages.
    given: String,
    touches: Vec<weir_api::Touch>,
}

impl TableLocation {
    /// Resolves `given`: an `s3://` URL through the S3 options and the AWS environment, a
    /// `file://` URL or a local path (relative to the current directory) on the local file
    /// system.
    ///
    /// # Errors
    /// [`Error::Config`] at `option_path` for a path or URL that cannot be resolved.
    pub(crate) fn resolve(given: &str, s3: Option<&S3Options>, option_path: &str) -> Result<Self> {
        let bad = |message: String| Error::config(option_path, message);
        if weir_api::is_s3_url(given) {
            let text = given.trim_end_matches('/');
            let mut url =
                Url::parse(text).map_err(|e| bad(format!("invalid URL `{given}`: {e}")))?;
            if url.scheme() == "s3a" {
                url.set_scheme("s3")
                    .map_err(|()| bad(format!("invalid URL `{given}`")))?;
            }
            let options = s3
                .cloned()
                .unwrap_or_default()
                .object_store_options(std::env::vars());
            let mut touches = vec![weir_api::Touch::Url(given.to_owned())];
            touches.extend(
                options
                    .iter()
                    .filter(|(k, _)| k == "aws_endpoint" || k == "aws_endpoint_url")
                    .map(|(_, v)| weir_api::Touch::Url(v.clone())),
            );
            // The store is the bucket's root; the table's prefix is in the URL.
            let mut bucket = url.clone();
            bucket.set_path("/");
            let (store, _) = object_store::parse_url_opts(&bucket, options)
                .map_err(|e| bad(format!("cannot open `{given}`: {e}")))?;
            return Ok(TableLocation {
                store: Arc::from(store),
                url,
                given: given.to_owned(),
                touches,
            });
        }
        let local = match given.strip_prefix("file://") {
            Some(rest) => std::path::PathBuf::from(rest),
            None if given.contains("://") => {
                return Err(bad(format!(
                    "`{given}` is neither a local path nor an s3:// or file:// URL"
                )));
            }
            None => std::path::PathBuf::from(given),
        };
        let cwd = std::env::current_dir()
            .map_err(|e| bad(format!("cannot read the current directory: {e}")))?;
        let absolute = normalize(&cwd.join(&local));
        let url = Url::from_directory_path(&absolute)
            .map_err(|()| bad(format!("invalid path `{given}`")))?;
        Ok(TableLocation {
            store: Arc::new(LocalFileSystem::new()),
            url,
            given: given.to_owned(),
            touches: vec![weir_api::Touch::local(&local, &cwd)],
        })
    }

    /// The path as the user wrote it.
    pub(crate) fn given(&self) -> &str {
        &self.given
    }

    /// The store the table is in (rooted at the file system's or bucket's root).
    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The table directory's path in [`TableLocation::store`].
    ///
    /// # Errors
    /// An external error for a URL path that is no object path.
    pub(crate) fn path(&self) -> Result<Path> {
        Path::from_url_path(self.url.path()).map_err(|e| self.error("opening", e))
    }

    /// The table's directory on the local file system, or `None` on S3.
    pub(crate) fn local_dir(&self) -> Option<std::path::PathBuf> {
        (self.url.scheme() == "file")
            .then(|| self.url.to_file_path().ok())
            .flatten()
    }

    /// What reading or writing the table touches.
    pub(crate) fn touches(&self) -> Vec<weir_api::Touch> {
        self.touches.clone()
    }

    /// A builder of the table on this location's store.
    fn builder(&self) -> Result<DeltaTableBuilder> {
        register_s3_log_store();
        Ok(DeltaTableBuilder::from_url(self.url.clone())
            .map_err(|e| self.error("opening", e))?
            .with_storage_backend(self.store.clone(), self.url.clone()))
    }

    /// Whether the table's log has any entry (a table exists here).
    async fn exists(&self) -> Result<bool> {
        let log = self.path()?.join("_delta_log");
        match self.store.list(Some(&log)).next().await {
            None | Some(Err(object_store::Error::NotFound { .. })) => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(self.error("listing the log of", e)),
        }
    }

    /// The table at its newest version (or at `version`), or `None` when there is no table.
    ///
    /// # Errors
    /// External errors when the store fails or the log cannot be read.
    pub(crate) async fn open(&self, version: Option<u64>) -> Result<Option<DeltaTable>> {
        if !self.exists().await? {
            return Ok(None);
        }
        let mut builder = self.builder()?;
        if let Some(v) = version {
            builder = builder.with_version(v);
        }
        match builder.load().await {
            Ok(table) => Ok(Some(table)),
            Err(DeltaTableError::NotATable(_)) if version.is_none() => Ok(None),
            Err(e) => Err(self.error("opening", e)),
        }
    }

    /// The table, created with `schema`, `partitions` and the table properties when missing.
    ///
    /// # Errors
    /// External errors when the store fails; another writer creating the table at the same
    /// time is fine (the table it made is opened).
    pub(crate) async fn open_or_create(
        &self,
        schema: &StructType,
        partitions: &[String],
        checkpoint_interval: u64,
    ) -> Result<DeltaTable> {
        if let Some(table) = self.open(None).await? {
            return Ok(table);
        }
        if let Ok(dir) = self.url.to_file_path() {
            std::fs::create_dir_all(&dir).map_err(|e| self.error("creating", e))?;
        }
        let log_store = self
            .builder()?
            .build_storage()
            .map_err(|e| self.error("opening", e))?;
        let created = deltalake_core::operations::create::CreateBuilder::new()
            .with_log_store(log_store)
            .with_columns(schema.fields().cloned())
            .with_partition_columns(partitions.to_vec())
            .with_configuration_property(
                TableProperty::CheckpointInterval,
                Some(checkpoint_interval.to_string()),
            )
            // A creation that loses version 0 to another writer must fail (and open theirs):
            // delta-rs would retry it on version 1, a second `CREATE TABLE` that replaces the
            // table's metadata (and id) under the other writers.
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        match created {
            Ok(table) => Ok(table),
            // Another writer created it first: use theirs (its schema is checked by the caller).
            Err(_) => match self.open(None).await? {
                Some(table) => Ok(table),
                None => Err(Error::external(
                    "delta",
                    format!("creating the table at {}", self.given),
                    "the table is neither created nor present",
                    true,
                )),
            },
        }
    }

    /// An external error of this table.
    pub(crate) fn error(&self, doing: &str, e: impl std::fmt::Display) -> Error {
        Error::external(
            "delta",
            format!("{doing} the table at {}", self.given),
            e,
            true,
        )
    }
}

/// Resolves `.` and `..` in an absolute path without touching the file system.
fn normalize(path: &std::path::Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// delta-rs's default log store for `s3://` tables: commits are written with a conditional put
/// (`If-None-Match: *`), which S3 and the S3-compatible servers Weir is tested with support, so
/// two writers never both win a version and no unsafe rename or lock table is needed.
#[derive(Debug, Default)]
struct ConditionalPutLogStores;

impl LogStoreFactory for ConditionalPutLogStores {
    fn with_options(
        &self,
        prefixed_store: Arc<dyn ObjectStore>,
        root_store: Arc<dyn ObjectStore>,
        location: &Url,
        options: &StorageConfig,
    ) -> deltalake_core::DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(
            prefixed_store,
            root_store,
            location,
            options,
        ))
    }
}

/// Registers [`ConditionalPutLogStores`] for `s3://` (and `s3a://`) once per process: delta-rs
/// knows only local and in-memory tables by itself.
fn register_s3_log_store() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        for scheme in ["s3://", "s3a://"] {
            if let Ok(url) = Url::parse(scheme) {
                deltalake_core::logstore::logstore_factories()
                    .insert(url, Arc::new(ConditionalPutLogStores));
            }
        }
    });
}
