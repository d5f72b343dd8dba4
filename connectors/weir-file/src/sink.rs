//! The `file` sink: each subtask writes rolling part files into one directory, each published
//! atomically (see [`crate::part_file`]).

use crate::epoch::{self, StagedFile, Transaction};
use crate::location::{FileLocation, store_error};
use crate::options::{FileFormat, FileSinkOptions};
use crate::part_file::{PartFile, writable_csv_type};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use object_store::ObjectStoreExt;
use object_store::registry::{DefaultObjectStoreRegistry, ObjectStoreRegistry};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use weir_api::{
    ConnectorSpec, Epoch, Error, PreparedSink, Result, SinkCapability, SinkFactory, SinkWriter,
    TaskContext, decode_options,
};

/// Bytes a part file buffers in memory before it switches to a streaming multipart upload; also
/// the size of each uploaded part (above S3's 5 MiB minimum).
const DEFAULT_UPLOAD_BYTES: usize = 8 * 1024 * 1024;

/// Creates `file` sinks: each subtask writes part files
/// `part-{subtask:05}-{seq:05}-{unique}.{ext}` into a directory of the local file system or an
/// object store, publishing each file atomically once it is complete. A writer put into epoch
/// mode (`begin_epochs`) stages its files and publishes them only through epoch transactions
/// (see `docs/connectors/file.md`, "Epoch transactions").
///
/// Share the [`ObjectStoreRegistry`] with [`crate::FileSourceFactory`] so both resolve URLs to the
/// same stores.
#[derive(Debug, Clone)]
pub struct FileSinkFactory {
    registry: Arc<dyn ObjectStoreRegistry>,
    upload_bytes: usize,
}

impl FileSinkFactory {
    /// A factory whose registry creates stores from URLs on first use.
    pub fn new() -> Self {
        Self::with_registry(Arc::new(DefaultObjectStoreRegistry::new()))
    }

    /// A factory that resolves URLs through `registry`.
    pub fn with_registry(registry: Arc<dyn ObjectStoreRegistry>) -> Self {
        Self {
            registry,
            upload_bytes: DEFAULT_UPLOAD_BYTES,
        }
    }

    /// Buffers `bytes` per file before uploading in parts, so tests can exercise multipart
    /// staging with little data.
    #[cfg(test)]
    pub(crate) fn with_upload_bytes(mut self, bytes: usize) -> Self {
        self.upload_bytes = bytes;
        self
    }
}

impl Default for FileSinkFactory {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl SinkFactory for FileSinkFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        let options: FileSinkOptions = decode_options(spec.options, spec.options_path)?;
        let options_path = spec.options_path;
        options.validate(options_path)?;
        let path_option = format!("{options_path}.path");
        let cwd = std::env::current_dir().map_err(|e| {
            Error::external("file system", "reading the current directory", e, false)
        })?;
        let location =
            FileLocation::resolve(&options.path, self.registry.as_ref(), &cwd, &path_option)?;
        if location.has_glob() {
            return Err(Error::config(
                path_option,
                "a sink writes into one directory; the path cannot be a glob",
            ));
        }
        if options.format == FileFormat::Csv
            && let Some(field) = input_schema
                .fields()
                .iter()
                .find(|f| !writable_csv_type(f.data_type()))
        {
            return Err(Error::schema(
                format!("file sink at {options_path}"),
                format!(
                    "column `{}` has type {}, which CSV cannot hold; use json or parquet",
                    field.name(),
                    field.data_type()
                ),
            ));
        }
        if !location.base().as_ref().is_empty() {
            match location.store().head(location.base()).await {
                Ok(_) => {
                    return Err(Error::config(
                        path_option,
                        format!("`{}` is a file; the sink needs a directory", options.path),
                    ));
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_error(format!("checking `{}`", options.path), e)),
            }
        }
        Ok(Arc::new(FileSink {
            location,
            options,
            schema: input_schema,
            upload_bytes: self.upload_bytes,
        }))
    }
}

/// A prepared `file` sink.
#[derive(Debug)]
struct FileSink {
    location: FileLocation,
    options: FileSinkOptions,
    schema: SchemaRef,
    upload_bytes: usize,
}

#[async_trait::async_trait]
impl PreparedSink for FileSink {
    fn capabilities(&self) -> Vec<SinkCapability> {
        vec![SinkCapability::AtLeastOnce]
    }

    fn describe(&self) -> String {
        format!("file: {} {}", self.options.format, self.location.given())
    }

    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(FileSinkWriter {
            location: self.location.clone(),
            options: self.options.clone(),
            schema: self.schema.clone(),
            upload_bytes: self.upload_bytes,
            subtask: ctx.subtask.0,
            unique: unique_suffix(ctx),
            seq: 0,
            current: None,
            epochs: None,
        }))
    }

    async fn commit_epoch(
        &self,
        task: &TaskContext,
        transactions: &[serde_json::Value],
    ) -> Result<()> {
        epoch::commit(&self.location, task.subtask.0, transactions).await
    }

    async fn abort_uncommitted(
        &self,
        task: &TaskContext,
        keep: &[serde_json::Value],
    ) -> Result<()> {
        epoch::abort_uncommitted(&self.location, task.subtask.0, keep).await
    }
}

/// A writer's epoch mode (see [`crate::epoch`]).
#[derive(Debug, Default)]
struct EpochStaging {
    /// The last pre-committed epoch.
    last: Option<u64>,
    /// Files closed into staging since the last pre-commit, in order.
    closed: Vec<String>,
}

/// One subtask's writer: at most one open part file at a time.
#[derive(Debug)]
struct FileSinkWriter {
    location: FileLocation,
    options: FileSinkOptions,
    schema: SchemaRef,
    upload_bytes: usize,
    subtask: u32,
    /// Distinguishes this writer's files from those of earlier runs of the same subtask.
    unique: String,
    /// Sequence number of the next part file.
    seq: u32,
    /// The open part file and, in epoch mode, its staged name.
    current: Option<(PartFile, Option<String>)>,
    /// `Some` in epoch mode: part files are staged and published by `commit_epoch`.
    epochs: Option<EpochStaging>,
}

impl FileSinkWriter {
    fn open_part(&mut self) -> Result<(PartFile, Option<String>)> {
        let extension = self.options.format.extension();
        let (name, staged) = if self.epochs.is_some() {
            let name = epoch::staged_name(self.subtask, &self.unique, self.seq, extension);
            (name.clone(), Some(name))
        } else {
            let name = format!(
                "part-{:05}-{:05}-{}.{}",
                self.subtask, self.seq, self.unique, extension
            );
            (name, None)
        };
        self.seq += 1;
        let part = PartFile::create(
            self.location.store().clone(),
            self.location.child(&name)?,
            self.location.display(&name),
            self.options.format,
            &self.schema,
            self.options.compression.unwrap_or_default(),
            self.upload_bytes,
        )?;
        Ok((part, staged))
    }

    /// Completes the open part file: published under its final name, or in epoch mode closed
    /// into staging (still invisible) and remembered for the next pre-commit.
    async fn publish(&mut self) -> Result<()> {
        match self.current.take() {
            Some((part, None)) => part.publish().await,
            Some((part, Some(staged))) => {
                part.publish().await?;
                if let Some(epochs) = &mut self.epochs {
                    epochs.closed.push(staged);
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// The size of the staged file `staged` (relative to `location`).
async fn staged_size(location: &FileLocation, staged: &str) -> Result<u64> {
    let path = location.child(staged)?;
    match location.store().head(&path).await {
        Ok(meta) => Ok(meta.size),
        Err(e) => Err(store_error(
            format!("checking `{}`", location.display(staged)),
            e,
        )),
    }
}

#[async_trait::async_trait]
impl SinkWriter for FileSinkWriter {
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let part = match &mut self.current {
                Some((part, _)) => part,
                None => {
                    let part = self.open_part()?;
                    &mut self.current.insert(part).0
                }
            };
            let room = self
                .options
                .rows_per_file
                .saturating_sub(part.rows())
                .max(1);
            let take = usize::try_from(room)
                .unwrap_or(usize::MAX)
                .min(batch.num_rows() - offset);
            if let Err(e) = part.write(&batch.slice(offset, take)).await {
                if let Some((part, _)) = self.current.take() {
                    // The write already failed; a failing cleanup adds nothing to report.
                    let _ = part.abort().await;
                }
                return Err(e);
            }
            offset += take;
            if part.rows() >= self.options.rows_per_file
                || part.bytes() >= self.options.bytes_per_file
            {
                self.publish().await?;
            }
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        if let Some(epochs) = &self.epochs
            && (self.current.is_some() || !epochs.closed.is_empty())
        {
            return Err(Error::Internal(format!(
                "file sink subtask {} finished with rows written after its last pre-commit; \
                 in epoch mode the final epoch must be pre-committed before finish",
                self.subtask
            )));
        }
        // In epoch mode everything is pre-committed: `commit_epoch` publishes it.
        self.publish().await
    }

    async fn abort(&mut self) -> Result<()> {
        let current = match self.current.take() {
            Some((part, _)) => part.abort().await,
            None => Ok(()),
        };
        // Files closed since the last pre-commit belong to no transaction; pre-committed ones
        // stay for recovery to publish or delete.
        if let Some(epochs) = &mut self.epochs {
            for staged in std::mem::take(&mut epochs.closed) {
                let path = self.location.child(&staged)?;
                match self.location.store().delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => {
                        return Err(store_error(
                            format!("discarding `{}`", self.location.display(&staged)),
                            e,
                        ));
                    }
                }
            }
        }
        current
    }

    async fn begin_epochs(&mut self) -> Result<()> {
        if self.seq > 0 || self.current.is_some() {
            return Err(Error::Internal(format!(
                "file sink subtask {}: epoch mode must begin before the first row",
                self.subtask
            )));
        }
        self.epochs.get_or_insert_with(EpochStaging::default);
        Ok(())
    }

    async fn pre_commit(&mut self, epoch: Epoch) -> Result<serde_json::Value> {
        let Some(last) = self.epochs.as_ref().map(|e| e.last) else {
            return Err(Error::Internal(format!(
                "file sink subtask {}: pre-commit of epoch {epoch} without begin_epochs",
                self.subtask
            )));
        };
        if last.is_some_and(|last| epoch.0 <= last) {
            return Err(Error::Internal(format!(
                "file sink subtask {}: pre-commit of epoch {epoch} after epoch {}",
                self.subtask,
                last.unwrap_or_default()
            )));
        }
        self.publish().await?;
        let closed = self
            .epochs
            .as_mut()
            .map(|e| std::mem::take(&mut e.closed))
            .unwrap_or_default();
        let extension = self.options.format.extension();
        let mut files = Vec::with_capacity(closed.len());
        for (seq, staged) in closed.into_iter().enumerate() {
            files.push(StagedFile {
                size: staged_size(&self.location, &staged).await?,
                final_name: epoch::final_name(self.subtask, epoch.0, seq, extension),
                staged,
            });
        }
        if let Some(epochs) = &mut self.epochs {
            epochs.last = Some(epoch.0);
        }
        let tx = Transaction {
            epoch: epoch.0,
            subtask: self.subtask,
            files,
        };
        serde_json::to_value(&tx)
            .map_err(|e| Error::Internal(format!("encoding a file sink pre-commit: {e}")))
    }
}

/// A 128-bit hex id, unique per writer: OS randomness, or (where the OS has none to give) hashes
/// of the time, process and task under randomly keyed std hashers.
fn unique_suffix(ctx: &TaskContext) -> String {
    let mut random = [0u8; 16];
    if getrandom::fill(&mut random).is_ok() {
        let a = u64::from_le_bytes(random[..8].try_into().unwrap_or_default());
        let b = u64::from_le_bytes(random[8..].try_into().unwrap_or_default());
        return format_id(a, b);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut halves = [0u64; 2];
    for (i, half) in halves.iter_mut().enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.write(ctx.job_id.as_str().as_bytes());
        hasher.write(ctx.operator_id.as_str().as_bytes());
        hasher.write_u32(ctx.subtask.0);
        hasher.write_usize(i);
        *half = hasher.finish();
    }
    let [a, b] = halves;
    format_id(a, b)
}

fn format_id(a: u64, b: u64) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::FileSourceFactory;
    use crate::test_support::{ctx, prepare, read_all, render, spec};
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    use serde_json::json;
    use weir_api::{BadRecordPolicy, SourceFactory};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
        let names: StringArray = ids
            .clone()
            .map(|i| (i % 3 != 0).then(|| format!("n{i}")))
            .collect();
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
                Arc::new(names),
            ],
        )
        .unwrap()
    }

    async fn sink(
        factory: &FileSinkFactory,
        options: serde_json::Value,
    ) -> Result<Arc<dyn PreparedSink>> {
        let mut spec = spec(&options, None, BadRecordPolicy::Fail);
        spec.options_path = "sinks[0].options";
        factory.prepare(spec, schema()).await
    }

    /// File names in `dir`, sorted (the directory may not exist yet).
    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// What an object-store reader lists under `dir`.
    async fn listed(dir: &std::path::Path) -> Vec<String> {
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
        let metas: Vec<_> = store.list(None).try_collect().await.unwrap();
        metas.into_iter().map(|m| m.location.to_string()).collect()
    }

    #[tokio::test]
    async fn each_format_round_trips_through_rolling_part_files() {
        let expected = render(&batch(0..10));
        for (format, compression) in [("csv", None), ("json", None), ("parquet", Some("zstd"))] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out");
            let mut options =
                json!({ "path": out.display().to_string(), "format": format, "rows_per_file": 4 });
            if let Some(compression) = compression {
                options["compression"] = json!(compression);
            }
            let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
            assert_eq!(sink.capabilities(), [SinkCapability::AtLeastOnce]);
            let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
            writer.write_batch(batch(0..3)).await.unwrap();
            writer.write_batch(batch(3..3)).await.unwrap();
            writer.write_batch(batch(3..10)).await.unwrap();
            writer.finish().await.unwrap();

            let files = names(&out);
            assert_eq!(files.len(), 3, "{format}: {files:?}");
            let unique = &files[0]["part-00001-00000-".len()..files[0].len() - format.len() - 1];
            assert_eq!(unique.len(), 36, "{format}: {files:?}");
            for (seq, file) in files.iter().enumerate() {
                assert_eq!(*file, format!("part-00001-{seq:05}-{unique}.{format}"));
            }
            let source = prepare(
                json!({ "path": out.display().to_string() }),
                Some(schema()),
                BadRecordPolicy::Fail,
            )
            .await
            .unwrap();
            assert_eq!(read_all(&source).await.unwrap(), expected, "{format}");
        }
    }

    #[tokio::test]
    async fn bytes_per_file_rolls_after_each_batch() {
        let dir = tempfile::tempdir().unwrap();
        let options = json!({ "path": dir.path().display().to_string(), "format": "csv", "bytes_per_file": 1 });
        let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
        let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
        writer.write_batch(batch(0..2)).await.unwrap();
        writer.write_batch(batch(2..5)).await.unwrap();
        writer.finish().await.unwrap();
        assert_eq!(names(dir.path()).len(), 2);
        let options = json!({ "path": dir.path().display().to_string() });
        let source = prepare(options, Some(schema()), BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..5)));
    }

    #[tokio::test]
    async fn unfinished_files_are_never_visible() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        // Tiny upload parts, so a file is staged as a multipart upload after the first batch.
        let factory = FileSinkFactory::new().with_upload_bytes(64);
        for format in ["json", "parquet"] {
            let options = json!({ "path": path, "format": format });
            let sink = sink(&factory, options).await.unwrap();

            let mut aborted = sink.create_writer(&ctx(0)).await.unwrap();
            aborted.write_batch(batch(0..50)).await.unwrap();
            aborted.write_batch(batch(50..100)).await.unwrap();
            if format == "json" {
                // Text formats upload per batch: the file is staged under a `#` name.
                assert!(
                    names(dir.path()).iter().any(|n| n.contains('#')),
                    "{format}"
                );
            }
            assert!(
                names(dir.path()).iter().all(|n| n.contains('#')),
                "{format}: {:?}",
                names(dir.path())
            );
            assert!(listed(dir.path()).await.is_empty(), "{format}");
            aborted.abort().await.unwrap();
            assert!(
                names(dir.path()).is_empty(),
                "{format}: {:?}",
                names(dir.path())
            );

            let mut dropped = sink.create_writer(&ctx(1)).await.unwrap();
            dropped.write_batch(batch(0..50)).await.unwrap();
            drop(dropped);
            assert!(
                names(dir.path()).iter().all(|n| n.contains('#')),
                "{format}"
            );
            assert!(listed(dir.path()).await.is_empty(), "{format}");
            let err = prepare(json!({ "path": path }), None, BadRecordPolicy::Fail)
                .await
                .unwrap_err();
            assert!(err.to_string().contains("no files match"), "{err}");

            let mut finished = sink.create_writer(&ctx(2)).await.unwrap();
            finished.write_batch(batch(0..50)).await.unwrap();
            finished.finish().await.unwrap();
            let visible = listed(dir.path()).await;
            assert_eq!(visible.len(), 1, "{format}: {visible:?}");
            assert!(visible[0].starts_with("part-00002-00000-"), "{visible:?}");
            std::fs::remove_file(dir.path().join(&visible[0])).unwrap();
        }
    }

    #[tokio::test]
    async fn bad_sink_options_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.csv");
        std::fs::write(&file, "x").unwrap();
        let factory = FileSinkFactory::new();
        for (options, field) in [
            (
                json!({ "path": format!("{}/*.csv", dir.path().display()), "format": "csv" }),
                "path",
            ),
            (
                json!({ "path": file.display().to_string(), "format": "csv" }),
                "path",
            ),
            (
                json!({ "path": "out", "format": "json", "compression": "zstd" }),
                "compression",
            ),
            (
                json!({ "path": "out", "format": "json", "rows_per_file": 0 }),
                "rows_per_file",
            ),
            (json!({ "path": "out", "format": "avro" }), "format"),
        ] {
            let err = sink(&factory, options).await.unwrap_err();
            assert!(
                matches!(&err, Error::Config { path, .. } if path == &format!("sinks[0].options.{field}")),
                "{err}"
            );
        }
        let nested = Arc::new(Schema::new(vec![Field::new(
            "l",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        )]));
        let options = json!({ "path": "out", "format": "csv" });
        let err = factory
            .prepare(spec(&options, None, BadRecordPolicy::Fail), nested)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Schema { .. }), "{err}");
    }

    #[tokio::test]
    async fn memory_round_trip_through_a_shared_registry() {
        let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
        let options = json!({ "path": "memory:///out/", "format": "parquet" });
        let sink = sink(&FileSinkFactory::with_registry(registry.clone()), options)
            .await
            .unwrap();
        assert_eq!(sink.describe(), "file: parquet memory:///out/");
        let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
        writer.write_batch(batch(0..5)).await.unwrap();
        writer.finish().await.unwrap();
        let options = json!({ "path": "memory:///out/" });
        let source = FileSourceFactory::with_registry(registry)
            .prepare(spec(&options, None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        let splits = source.enumerate_splits().await.unwrap();
        assert_eq!(splits.len(), 1);
        assert!(
            splits[0].id.starts_with("memory:///out/part-00000-00000-"),
            "{}",
            splits[0].id
        );
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..5)));
    }

    /// Published (visible) file names in `dir`.
    fn published(dir: &std::path::Path) -> Vec<String> {
        names(dir)
            .into_iter()
            .filter(|n| !n.starts_with('_'))
            .collect()
    }

    /// Files below `dir` (recursively), relative to it.
    fn all_files(dir: &std::path::Path) -> Vec<String> {
        fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else {
                    out.push(path.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    fn final_names(tx: &serde_json::Value) -> Vec<String> {
        tx["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["final"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Writes epochs 1 (rows 0..6, two files) and 2 (rows 6..9) and returns their pre-commits.
    async fn two_epochs(sink: &Arc<dyn PreparedSink>) -> (serde_json::Value, serde_json::Value) {
        let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
        writer.begin_epochs().await.unwrap();
        writer.write_batch(batch(0..6)).await.unwrap();
        let t1 = writer.pre_commit(Epoch(1)).await.unwrap();
        writer.write_batch(batch(6..9)).await.unwrap();
        let t2 = writer.pre_commit(Epoch(2)).await.unwrap();
        writer.finish().await.unwrap();
        (t1, t2)
    }

    #[tokio::test]
    async fn epoch_transactions_publish_only_on_commit_and_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let path = out.display().to_string();
        let options = json!({ "path": path, "format": "json", "rows_per_file": 4 });
        let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
        let (t1, t2) = two_epochs(&sink).await;
        assert_eq!(t1["epoch"], 1);
        assert_eq!(t1["subtask"], 1);
        assert_eq!(
            final_names(&t1),
            [
                "part-00001-e0000000001-00000.json",
                "part-00001-e0000000001-00001.json"
            ]
        );
        assert_eq!(final_names(&t2), ["part-00001-e0000000002-00000.json"]);
        for file in t1["files"].as_array().unwrap() {
            assert!(
                file["staged"]
                    .as_str()
                    .unwrap()
                    .starts_with("_staging/00001/"),
                "{file}"
            );
            assert!(file["size"].as_u64().unwrap() > 0, "{file}");
        }

        // Pre-committed is not visible: the source finds nothing.
        assert!(published(&out).is_empty(), "{:?}", names(&out));
        assert_eq!(all_files(&out).len(), 3, "{:?}", all_files(&out));
        let read = json!({ "path": path });
        let err = prepare(read.clone(), Some(schema()), BadRecordPolicy::Fail)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no files match"), "{err}");

        // Epoch 1 only, twice.
        for _ in 0..2 {
            sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
                .await
                .unwrap();
            assert_eq!(published(&out), final_names(&t1));
            let source = prepare(read.clone(), Some(schema()), BadRecordPolicy::Fail)
                .await
                .unwrap();
            assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..6)));
        }

        // Both epochs (epoch 1 again is a no-op), twice.
        for _ in 0..2 {
            sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
                .await
                .unwrap();
            let mut expected = final_names(&t1);
            expected.extend(final_names(&t2));
            assert_eq!(published(&out), expected);
            assert!(!all_files(&out).iter().any(|f| f.starts_with("_staging")));
            let source = prepare(read.clone(), Some(schema()), BadRecordPolicy::Fail)
                .await
                .unwrap();
            assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));
        }

        // A later run stages epoch 3 and fails; recovery keeps only epoch 2 (already published).
        let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
        writer.begin_epochs().await.unwrap();
        writer.write_batch(batch(9..12)).await.unwrap();
        let t3 = writer.pre_commit(Epoch(3)).await.unwrap();
        writer.write_batch(batch(12..13)).await.unwrap();
        drop(writer);
        assert!(
            all_files(&out)
                .iter()
                .any(|f| f.starts_with("_staging/00001/"))
        );
        // Another subtask's staged files are not this subtask's to delete.
        let mut other = sink.create_writer(&ctx(0)).await.unwrap();
        other.begin_epochs().await.unwrap();
        other.write_batch(batch(0..1)).await.unwrap();
        let t_other = other.pre_commit(Epoch(3)).await.unwrap();
        sink.abort_uncommitted(&ctx(1), std::slice::from_ref(&t2))
            .await
            .unwrap();
        let left = all_files(&out);
        assert!(
            !left.iter().any(|f| f.starts_with("_staging/00001/")),
            "{left:?}"
        );
        assert_eq!(
            left.iter()
                .filter(|f| f.starts_with("_staging/00000/"))
                .count(),
            1,
            "{left:?}"
        );
        let err = sink
            .commit_epoch(&ctx(1), std::slice::from_ref(&t3))
            .await
            .unwrap_err();
        let staged = t3["files"][0]["staged"].as_str().unwrap();
        let text = err.to_string();
        assert!(
            text.contains(staged) && text.contains("part-00001-e0000000003-00000.json"),
            "{text}"
        );
        // A transaction of another subtask is refused.
        let err = sink
            .commit_epoch(&ctx(1), std::slice::from_ref(&t_other))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err}");
        let source = prepare(read, Some(schema()), BadRecordPolicy::Fail)
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));
    }

    #[tokio::test]
    async fn epoch_file_names_are_deterministic() {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out");
            let options = json!({ "path": out.display().to_string(), "format": "parquet", "rows_per_file": 4 });
            let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
            let (t1, t2) = two_epochs(&sink).await;
            sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
                .await
                .unwrap();
            runs.push((final_names(&t1), final_names(&t2), published(&out)));
        }
        assert_eq!(runs[0], runs[1]);
        assert_eq!(runs[0].2.len(), 3);
    }

    #[tokio::test]
    async fn epoch_mode_contract_errors() {
        let dir = tempfile::tempdir().unwrap();
        let options = json!({ "path": dir.path().display().to_string(), "format": "csv" });
        let sink = sink(&FileSinkFactory::new(), options).await.unwrap();
        // Nothing staged yet: recovery has nothing to delete.
        sink.abort_uncommitted(&ctx(5), &[]).await.unwrap();
        let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
        assert!(writer.pre_commit(Epoch(1)).await.is_err());
        writer.write_batch(batch(0..2)).await.unwrap();
        assert!(writer.begin_epochs().await.is_err());
        writer.abort().await.unwrap();

        let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
        writer.begin_epochs().await.unwrap();
        writer.write_batch(batch(0..2)).await.unwrap();
        writer.pre_commit(Epoch(4)).await.unwrap();
        assert!(writer.pre_commit(Epoch(4)).await.is_err());
        let empty = writer.pre_commit(Epoch(5)).await.unwrap();
        assert_eq!(empty["files"], json!([]));
        writer.write_batch(batch(2..3)).await.unwrap();
        let err = writer.finish().await.unwrap_err();
        assert!(err.to_string().contains("pre-commit"), "{err}");
        writer.abort().await.unwrap();
        assert!(published(dir.path()).is_empty());

        // A final file of another size in the way is an error, not a silent success.
        let mut writer = sink.create_writer(&ctx(0)).await.unwrap();
        writer.begin_epochs().await.unwrap();
        writer.write_batch(batch(0..2)).await.unwrap();
        let tx = writer.pre_commit(Epoch(7)).await.unwrap();
        std::fs::write(dir.path().join("part-00000-e0000000007-00000.csv"), "x").unwrap();
        let err = sink.commit_epoch(&ctx(0), &[tx]).await.unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }

    #[tokio::test]
    async fn epoch_transactions_on_an_object_store() {
        let registry: Arc<dyn ObjectStoreRegistry> = Arc::new(DefaultObjectStoreRegistry::new());
        let options =
            json!({ "path": "memory:///epochs/", "format": "parquet", "rows_per_file": 4 });
        let sink = sink(&FileSinkFactory::with_registry(registry.clone()), options)
            .await
            .unwrap();
        let (t1, t2) = two_epochs(&sink).await;
        let read = json!({ "path": "memory:///epochs/" });
        let source_factory = FileSourceFactory::with_registry(registry);
        let err = source_factory
            .prepare(spec(&read, None, BadRecordPolicy::Fail))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no files match"), "{err}");

        sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
            .await
            .unwrap();
        sink.commit_epoch(&ctx(1), std::slice::from_ref(&t1))
            .await
            .unwrap();
        let source = source_factory
            .prepare(spec(&read, None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        let splits = source.enumerate_splits().await.unwrap();
        assert_eq!(
            splits.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            [
                "memory:///epochs/part-00001-e0000000001-00000.parquet",
                "memory:///epochs/part-00001-e0000000001-00001.parquet"
            ]
        );
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..6)));

        sink.commit_epoch(&ctx(1), &[t1.clone(), t2.clone()])
            .await
            .unwrap();
        let source = source_factory
            .prepare(spec(&read, None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));

        let mut writer = sink.create_writer(&ctx(1)).await.unwrap();
        writer.begin_epochs().await.unwrap();
        writer.write_batch(batch(9..12)).await.unwrap();
        let t3 = writer.pre_commit(Epoch(3)).await.unwrap();
        sink.abort_uncommitted(&ctx(1), &[t2]).await.unwrap();
        assert!(sink.commit_epoch(&ctx(1), &[t3]).await.is_err());
        let source = source_factory
            .prepare(spec(&read, None, BadRecordPolicy::Fail))
            .await
            .unwrap();
        assert_eq!(read_all(&source).await.unwrap(), render(&batch(0..9)));
    }
}
