//! Shared helpers: generated input files and reading sink output back.

use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::Path;

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
