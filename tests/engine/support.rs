//! Shared helpers: generated input files and reading sink output back.

use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::Path;

/// The rows of every part file in `dir`: Parquet, or JSON lines (all files read as one text, so
/// that they get one schema). A changelog-json file's `{"data": {...}, "op": ...}` rows are
/// flattened into `op` followed by the data's columns.
pub fn read_sink_dir(dir: &Path) -> Vec<RecordBatch> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("output directory exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    if files.is_empty() {
        return read_parquet_dir(dir);
    }
    files.sort();
    read_json_files(&files)
}

/// Every row of the JSON-lines files `files`, under one inferred schema, with changelog-json
/// envelopes flattened (see [`read_sink_dir`]).
pub fn read_json_files(files: &[std::path::PathBuf]) -> Vec<RecordBatch> {
    use arrow::array::{ArrayRef, AsArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;
    let mut text = Vec::new();
    for f in files {
        text.extend(std::fs::read(f).expect("read part file"));
    }
    let (schema, _) =
        arrow::json::reader::infer_json_schema_from_seekable(std::io::Cursor::new(&text), None)
            .expect("JSON lines");
    let reader = arrow::json::ReaderBuilder::new(Arc::new(schema))
        .build(std::io::Cursor::new(&text))
        .expect("JSON reader");
    reader
        .map(|b| {
            let batch = b.expect("JSON batch");
            let schema = batch.schema();
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            if names != ["data", "op"] {
                return batch;
            }
            let data = batch.column(0).as_struct();
            let mut fields: Vec<Arc<Field>> = vec![schema.field(1).clone().into()];
            let mut columns: Vec<ArrayRef> = vec![Arc::clone(batch.column(1))];
            for (field, column) in data.fields().iter().zip(data.columns()) {
                fields.push(Arc::clone(field));
                columns.push(Arc::clone(column));
            }
            RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("flattened")
        })
        .collect()
}

/// Every batch of every Parquet part file in `dir` (skipping anything else).
pub fn read_parquet_dir(dir: &Path) -> Vec<RecordBatch> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("output directory exists")
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        assert_eq!(
            f.extension().and_then(|e| e.to_str()),
            Some("parquet"),
            "only published part files may be visible: {f:?}"
        );
        let file = std::fs::File::open(&f).expect("open part file");
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .expect("parquet footer")
            .build()
            .expect("reader");
        for b in reader {
            out.push(b.expect("batch"));
        }
    }
    out
}

/// The rows a sink's output stands for, sorted: [`format_rows`] of its rows, except that the
/// changes of a changelog output (`op` then the columns, as [`read_sink_dir`] flattens
/// changelog-json; or Debezium's `before`, `after`, `op`) are applied: each `+I`/`+U` (`c`)
/// adds its row and each `-U`/`-D` (`d`) takes one away. Which changes an updating job emits
/// can depend on timing between its tasks; the table they leave cannot.
pub fn table_rows(batches: &[RecordBatch]) -> Vec<String> {
    let Some(first) = batches.first() else {
        return Vec::new();
    };
    let schema = first.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let debezium = names == ["before", "after", "op"];
    if names.first() != Some(&"op") && !debezium {
        return format_rows(batches);
    }
    let mut net: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for batch in batches {
        let op = batch.column(if debezium { 2 } else { 0 });
        let ops = arrow::compute::cast(op, &arrow::datatypes::DataType::Utf8).expect("op");
        let ops = arrow::array::AsArray::as_string::<i32>(&ops);
        for r in 0..batch.num_rows() {
            let kind = ops.value(r);
            let (sign, row) = if debezium {
                let side = if kind == "c" { 1 } else { 0 };
                let row = format_rows(&[batch.project(&[side]).expect("side").slice(r, 1)]);
                (if kind == "c" { 1 } else { -1 }, row)
            } else {
                let columns: Vec<usize> = (1..batch.num_columns()).collect();
                let row = format_rows(&[batch.project(&columns).expect("data").slice(r, 1)]);
                (if kind.starts_with('+') { 1 } else { -1 }, row)
            };
            for line in row {
                *net.entry(line).or_insert(0) += sign;
            }
        }
    }
    let mut out = Vec::new();
    for (row, count) in net {
        assert!(
            count >= 0,
            "a change retracts the row `{row}`, which is not there"
        );
        out.extend(std::iter::repeat_n(row, count as usize));
    }
    out
}

/// A tiny deterministic generator (splitmix64) so tests need no extra crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every batch of the part files a sink has published in `dir`: files named `part-*` directly
/// in it. Staged files (under `_staging/`) are not output yet and are skipped; a missing
/// directory has published nothing.
pub fn read_published_parts(dir: &Path) -> Vec<RecordBatch> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("part-"))
        })
        .collect();
    files.sort();
    if files
        .iter()
        .any(|f| f.extension().is_some_and(|e| e == "json"))
    {
        return read_json_files(&files);
    }
    let mut out = Vec::new();
    for f in files {
        let file = std::fs::File::open(&f).expect("open part file");
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap_or_else(|e| panic!("{}: not a Parquet part file: {e}", f.display()))
            .build()
            .expect("reader");
        for b in reader {
            out.push(b.expect("batch"));
        }
    }
    out
}

/// Rows as strings, cells joined by `" | "`, nulls as `NULL`; sorted, to compare as multisets.
pub fn format_rows(batches: &[RecordBatch]) -> Vec<String> {
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for batch in batches {
        let formatters: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formatter"))
            .collect();
        for r in 0..batch.num_rows() {
            let cells: Vec<String> = formatters.iter().map(|f| f.value(r).to_string()).collect();
            out.push(cells.join(" | "));
        }
    }
    out.sort();
    out
}
