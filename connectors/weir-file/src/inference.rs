//! Schema inference from the first non-empty matching file: the first records of a CSV or
//! JSON-lines file, the footer of a Parquet file.

use crate::csv_record::scan_records;
use crate::json_reader::scan_lines;
use crate::location::ListedFile;
use crate::object_bytes::ObjectBytes;
use crate::options::{CsvSettings, FileFormat};
use crate::parquet_reader::parquet_builder;
use arrow::datatypes::{DataType, Field, Schema};
use object_store::ObjectStore;
use std::io::Cursor;
use std::sync::Arc;
use weir_api::{Error, Result};

/// Records read to infer a CSV or JSON schema.
pub(crate) const INFERENCE_RECORDS: usize = 1000;

/// Infers the schema of `files` (sorted) from the first one that is not empty.
///
/// Every inferred field is nullable, since a sample cannot show that a column never holds
/// nulls; a column that is null in the whole sample is read as text.
///
/// # Errors
/// [`Error::Schema`] when every file is empty or the sample cannot be parsed; external errors
/// when reading fails.
pub(crate) async fn infer_schema(
    store: &Arc<dyn ObjectStore>,
    files: &[ListedFile],
    format: FileFormat,
    csv: CsvSettings,
    block_bytes: usize,
) -> Result<Schema> {
    let Some(file) = files.iter().find(|f| f.size > 0) else {
        return Err(Error::schema(
            "file source",
            "cannot infer a schema: every matching file is empty; declare `schema`",
        ));
    };
    let schema = match format {
        FileFormat::Csv => {
            let head = read_head(store, file, block_bytes, |buf, eof| {
                let wanted = INFERENCE_RECORDS + usize::from(csv.has_header);
                let scan = scan_records(buf, 0, 1, eof, wanted, csv.delimiter);
                (scan.records.len() >= wanted || eof).then_some(scan.consumed)
            })
            .await?;
            arrow::csv::reader::Format::default()
                .with_header(csv.has_header)
                .with_delimiter(csv.delimiter)
                .infer_schema(Cursor::new(head), Some(INFERENCE_RECORDS))
                .map(|(schema, _)| schema)
        }
        FileFormat::Json => {
            let head = read_head(store, file, block_bytes, |buf, eof| {
                let scan = scan_lines(buf, 0, 1, eof, INFERENCE_RECORDS);
                (scan.lines.len() >= INFERENCE_RECORDS || eof).then_some(scan.consumed)
            })
            .await?;
            arrow::json::reader::infer_json_schema(Cursor::new(head), Some(INFERENCE_RECORDS))
                .map(|(schema, _)| schema)
        }
        FileFormat::Parquet => {
            let builder =
                parquet_builder(store.clone(), file.path.clone(), &file.id, false).await?;
            return Ok(Schema::new(builder.schema().fields().clone()));
        }
    }
    .map_err(|e| Error::schema(&file.id, format!("cannot infer a schema: {e}")))?;
    if schema.fields().is_empty() {
        return Err(Error::schema(
            &file.id,
            "cannot infer a schema: no columns found; declare `schema`",
        ));
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Null => Field::new(f.name(), DataType::Utf8, true),
            _ => f.as_ref().clone().with_nullable(true),
        })
        .collect();
    Ok(Schema::new(fields))
}

/// Reads `file` block by block until `enough(bytes, eof)` says how many leading bytes to keep.
async fn read_head(
    store: &Arc<dyn ObjectStore>,
    file: &ListedFile,
    block_bytes: usize,
    enough: impl Fn(&[u8], bool) -> Option<usize>,
) -> Result<Vec<u8>> {
    let mut bytes =
        ObjectBytes::open(store.clone(), file.path.clone(), &file.id, block_bytes).await?;
    loop {
        if let Some(keep) = enough(bytes.pending(), bytes.eof()) {
            return Ok(bytes.pending()[..keep].to_vec());
        }
        bytes.fill().await?;
    }
}
