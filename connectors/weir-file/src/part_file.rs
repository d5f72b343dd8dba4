//! One part file being written: encoded batch by batch and published atomically when finished.
//!
//! Every part file goes through an object_store [`BufWriter`]: up to its capacity the bytes stay
//! in memory and are written with one `put`; beyond it they stream out as a multipart upload.
//! Either way the object appears under its final name only when complete: a `put` is atomic on
//! every store (the local file system writes a staging file and renames it), and a multipart
//! upload is invisible until it is completed (locally it is staged as `<name>#<n>`, which
//! listings skip, and renamed on completion). Aborting a multipart upload, or dropping it,
//! removes what was staged.

use crate::options::{FileFormat, ParquetCompression};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use weir_api::{Error, Result};

/// Largest Parquet row group kept in memory before it is encoded and uploaded.
const ROW_GROUP_BYTES: usize = 64 * 1024 * 1024;

enum Encoder {
    Parquet(Box<AsyncArrowWriter<BufWriter>>),
    Text {
        out: Box<BufWriter>,
        format: FileFormat,
        header_pending: bool,
        /// JSON: write null fields as `null` instead of leaving them out.
        explicit_nulls: bool,
    },
}

/// How a part file's rows are encoded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Encoding {
    pub(crate) format: FileFormat,
    /// Parquet's codec.
    pub(crate) compression: ParquetCompression,
    /// JSON: null fields written as `null` rather than left out (changelog envelopes).
    pub(crate) explicit_nulls: bool,
}

/// A part file being written.
pub(crate) struct PartFile {
    /// The file's name in messages.
    id: String,
    encoder: Encoder,
    rows: u64,
    text_bytes: u64,
}

impl std::fmt::Debug for PartFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartFile")
            .field("id", &self.id)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl PartFile {
    /// Starts the part file `path` (named `id` in messages); nothing is visible until
    /// [`Self::publish`].
    ///
    /// `upload_bytes` is the in-memory buffer and the multipart part size.
    ///
    /// # Errors
    /// External errors when the Parquet writer cannot be created for `schema`.
    pub(crate) fn create(
        store: Arc<dyn ObjectStore>,
        path: Path,
        id: String,
        encoding: Encoding,
        schema: &SchemaRef,
        upload_bytes: usize,
    ) -> Result<Self> {
        let Encoding {
            format,
            compression,
            explicit_nulls,
        } = encoding;
        let out = BufWriter::with_capacity(store, path, upload_bytes).with_max_concurrency(4);
        let encoder = match format {
            FileFormat::Parquet => {
                let compression = match compression {
                    ParquetCompression::Snappy => Compression::SNAPPY,
                    ParquetCompression::Zstd => Compression::ZSTD(ZstdLevel::default()),
                    ParquetCompression::Uncompressed => Compression::UNCOMPRESSED,
                };
                let props = WriterProperties::builder()
                    .set_compression(compression)
                    .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
                    .build();
                let writer = AsyncArrowWriter::try_new(out, schema.clone(), Some(props))
                    .map_err(|e| write_error(&id, e))?;
                Encoder::Parquet(Box::new(writer))
            }
            FileFormat::Csv | FileFormat::Json => Encoder::Text {
                out: Box::new(out),
                format,
                header_pending: true,
                explicit_nulls,
            },
        };
        Ok(Self {
            id,
            encoder,
            rows: 0,
            text_bytes: 0,
        })
    }

    /// Rows written so far.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Bytes written so far, including Parquet data still buffered for the open row group.
    pub(crate) fn bytes(&self) -> u64 {
        match &self.encoder {
            Encoder::Parquet(writer) => (writer.bytes_written() + writer.in_progress_size()) as u64,
            Encoder::Text { .. } => self.text_bytes,
        }
    }

    /// Parquet: ends the open row group when `rows` more rows of `bytes` (an input row group)
    /// would take it past the row group limits (64 MiB, the writer's 1,048,576 rows), so that
    /// the next row group stays whole.
    ///
    /// # Errors
    /// Parquet or store errors when the row group cannot be written.
    pub(crate) async fn fit_row_group(&mut self, rows: u64, bytes: u64) -> Result<()> {
        if let Encoder::Parquet(writer) = &mut self.encoder {
            let open = writer.in_progress_size() as u64;
            let open_rows = writer.in_progress_rows() as u64;
            let max_rows = parquet::file::properties::DEFAULT_MAX_ROW_GROUP_ROW_COUNT as u64;
            if open_rows > 0
                && (open + bytes > ROW_GROUP_BYTES as u64 || open_rows + rows > max_rows)
            {
                writer.flush().await.map_err(|e| write_error(&self.id, e))?;
            }
        }
        Ok(())
    }

    /// Encodes and stages `batch`.
    ///
    /// # Errors
    /// Arrow errors when encoding fails; external errors when the store fails.
    pub(crate) async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match &mut self.encoder {
            Encoder::Parquet(writer) => {
                writer
                    .write(batch)
                    .await
                    .map_err(|e| write_error(&self.id, e))?;
            }
            Encoder::Text {
                out,
                format,
                header_pending,
                explicit_nulls,
            } => {
                let encoded = encode_text(*format, batch, *header_pending, *explicit_nulls)
                    .map_err(|e| Error::arrow(format!("encoding `{}`", self.id), e))?;
                *header_pending = false;
                self.text_bytes += encoded.len() as u64;
                out.put(Bytes::from(encoded)).await.map_err(|e| {
                    crate::location::store_error(format!("writing `{}`", self.id), e)
                })?;
            }
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Completes the file: it becomes visible under its final name.
    ///
    /// # Errors
    /// External errors when the upload fails; then nothing is visible and the staged data is
    /// removed when the upload is dropped.
    pub(crate) async fn publish(self) -> Result<()> {
        let bytes = self.bytes();
        match self.encoder {
            Encoder::Parquet(writer) => {
                writer.close().await.map_err(|e| write_error(&self.id, e))?;
            }
            Encoder::Text { mut out, .. } => {
                out.shutdown().await.map_err(|e| {
                    Error::external("object store", format!("publishing `{}`", self.id), e, true)
                })?;
            }
        }
        tracing::debug!(file = %self.id, rows = self.rows, bytes, "published part file");
        Ok(())
    }

    /// Discards the file and anything staged for it.
    ///
    /// # Errors
    /// External errors when the staged upload cannot be removed.
    pub(crate) async fn abort(self) -> Result<()> {
        let mut out = match self.encoder {
            Encoder::Parquet(writer) => writer.into_inner(),
            Encoder::Text { out, .. } => *out,
        };
        out.abort()
            .await
            .map_err(|e| crate::location::store_error(format!("discarding `{}`", self.id), e))
    }
}

fn write_error(id: &str, err: parquet::errors::ParquetError) -> Error {
    Error::external("parquet", format!("writing `{id}`"), err, false)
}

/// One batch as CSV (with the header when `header` is set) or JSON lines (null fields written
/// as `null` when `explicit_nulls` is set, left out otherwise).
fn encode_text(
    format: FileFormat,
    batch: &RecordBatch,
    header: bool,
    explicit_nulls: bool,
) -> Result<Vec<u8>, arrow::error::ArrowError> {
    match format {
        FileFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new()
                .with_header(header)
                .build(Vec::new());
            writer.write(batch)?;
            Ok(writer.into_inner())
        }
        FileFormat::Json | FileFormat::Parquet => {
            let mut writer = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(explicit_nulls)
                .build::<_, arrow::json::writer::LineDelimited>(Vec::new());
            writer.write(batch)?;
            writer.finish()?;
            Ok(writer.into_inner())
        }
    }
}

/// Whether arrow's CSV writer can write `data_type` (no nested types).
pub(crate) fn writable_csv_type(data_type: &DataType) -> bool {
    !data_type.is_nested()
}
