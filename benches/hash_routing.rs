//! Hash routing of one 64k-row batch, the per-batch work of every HASH edge.
//!
//! Stresses (a) the stable key hash `weir_plan::key_hash::hash_keys` over one Int64 and one Utf8
//! key column, and (b) `HashPartitioner::partition` of a 6-column bid batch (Int64 auction,
//! Int64 bidder, Float64 price, Utf8 channel, Utf8 url, Int64 date_time) keyed by `auction` over
//! 128 state shards into 2 and 4 downstream subtasks: hash, shard -> owner, counting sort and
//! one Arrow `take` per output. Throughput is in rows. Every iteration asserts its row total
//! (hashes produced, rows over all outputs), so a broken router cannot look fast.
//!
//! Run: `CARGO_TARGET_DIR=/var/tmp/weir-target cargo bench --bench hash_routing`.

use std::hint::black_box;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use weir::plan::ShardAssignment;
use weir::plan::key_hash::hash_keys;
use weir::runtime::partition::HashPartitioner;

/// Rows in the batch: a large source batch.
const ROWS: usize = 64 * 1024;
/// State shards of the keyed vertex (the engine's default).
const SHARDS: u32 = 128;

/// A splitmix64 step: deterministic pseudo-random values without a `rand` dependency.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The 6-column bid batch: 10k auctions, 100k bidders, 4 channels, 1000 urls.
fn bid_batch() -> RecordBatch {
    let rows = 0..ROWS as u64;
    let channels = ["apple", "google", "facebook", "baidu"];
    let schema = Arc::new(Schema::new(vec![
        Field::new("auction", DataType::Int64, false),
        Field::new("bidder", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
        Field::new("channel", DataType::Utf8, false),
        Field::new("url", DataType::Utf8, false),
        Field::new("date_time", DataType::Int64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(
            rows.clone().map(|r| (mix(r) % 10_000) as i64),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.clone().map(|r| (mix(r ^ 0xB1D) % 100_000) as i64),
        )),
        Arc::new(Float64Array::from_iter_values(
            rows.clone()
                .map(|r| (mix(r ^ 0x9E1) % 100_000) as f64 / 100.0),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.clone()
                .map(|r| channels[(mix(r ^ 0xC4A) % 4) as usize]),
        )),
        Arc::new(StringArray::from_iter_values(rows.clone().map(|r| {
            format!(
                "https://www.nexmark.com/item.htm?query={}",
                mix(r ^ 0x0A1) % 1000
            )
        }))),
        Arc::new(Int64Array::from_iter_values(
            rows.map(|r| 1_700_000_000_000 + r as i64),
        )),
    ];
    RecordBatch::try_new(schema, columns).expect("the bid batch matches its schema")
}

fn key_hash(c: &mut Criterion) {
    let batch = bid_batch();
    let mut group = c.benchmark_group("key_hash");
    group.throughput(Throughput::Elements(ROWS as u64));
    for (label, column) in [("int64", 0), ("utf8", 4)] {
        let keys = [Arc::clone(batch.column(column))];
        group.bench_function(BenchmarkId::new("hash_keys", label), |b| {
            b.iter(|| {
                let hashes = hash_keys(black_box(&keys)).expect("the key type is hashable");
                assert_eq!(hashes.len(), ROWS);
                hashes
            });
        });
    }
    group.finish();
}

fn partition(c: &mut Criterion) {
    let batch = bid_batch();
    let mut group = c.benchmark_group("hash_partition");
    group.throughput(Throughput::Elements(ROWS as u64));
    for parallelism in [2_u32, 4] {
        let owners = ShardAssignment::contiguous(SHARDS, parallelism)
            .expect("fewer subtasks than shards")
            .owner_table();
        let partitioner = HashPartitioner::try_new(vec![0], owners, parallelism as usize)
            .expect("a consistent partitioner");
        group.bench_function(BenchmarkId::new("6_columns", parallelism), |b| {
            b.iter(|| {
                let parts = partitioner
                    .partition(black_box(&batch))
                    .expect("partitioning succeeds");
                let routed: usize = parts.iter().flatten().map(RecordBatch::num_rows).sum();
                assert_eq!(routed, ROWS, "every row is routed exactly once");
                parts
            });
        });
    }
    group.finish();
}

criterion_group!(benches, key_hash, partition);
criterion_main!(benches);
