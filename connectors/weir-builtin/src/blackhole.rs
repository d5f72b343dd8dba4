//! The `blackhole` sink: discards every row and counts it, like Flink's `blackhole` connector.
//!
//! It measures a pipeline without the cost of a real sink. With `rows_per_second` set it throttles
//! itself to that rate, which makes a deliberately slow sink for backpressure tests.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use serde::Deserialize;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use weir_api::{
    ConnectorSpec, Error, PreparedSink, Result, SinkCapability, SinkFactory, SinkWriter,
    TaskContext, decode_options,
};

/// The options of a `blackhole` sink node.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlackholeOptions {
    /// When set, each writer accepts at most this many rows per second (averaged since its first
    /// batch) by sleeping after a batch that got ahead.
    rows_per_second: Option<u64>,
}

/// Prepares `blackhole` sinks, which discard their input and count its rows.
///
/// Benchmarks use it to measure a pipeline without the cost of a real sink. Its one option,
/// `rows_per_second` (optional, at least 1), makes each writer hold itself to that average rate
/// from its first batch by sleeping on tokio's clock, which gives backpressure tests a
/// deliberately slow sink. Unknown options are [`Error::Config`] errors naming their path.
///
/// The sink is [`SinkCapability::Idempotent`]: it writes nothing, so replays change nothing.
/// Every sink this factory (or a clone of it) prepares adds to one shared row counter, so a
/// benchmark that registers its own factory can assert how many rows reached the end.
#[derive(Debug, Clone, Default)]
pub struct BlackholeSinkFactory {
    rows: Arc<AtomicU64>,
}

impl BlackholeSinkFactory {
    /// A factory with its row counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rows written so far by all writers of sinks this factory (or a clone of it) prepared.
    pub fn rows_written(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }
}

#[async_trait::async_trait]
impl SinkFactory for BlackholeSinkFactory {
    async fn prepare(
        &self,
        spec: ConnectorSpec<'_>,
        _input_schema: SchemaRef,
    ) -> Result<Arc<dyn PreparedSink>> {
        let options: BlackholeOptions = if spec.options.is_null() {
            BlackholeOptions::default()
        } else {
            decode_options(spec.options, spec.options_path)?
        };
        let rows_per_second = match options.rows_per_second {
            None => None,
            Some(rate) => Some(NonZeroU64::new(rate).ok_or_else(|| {
                Error::config(
                    format!("{}.rows_per_second", spec.options_path),
                    "must be at least 1 (omit it for no limit)",
                )
            })?),
        };
        Ok(Arc::new(BlackholeSink {
            rows_per_second,
            rows: self.rows.clone(),
        }))
    }
}

/// A prepared `blackhole` sink.
#[derive(Debug)]
struct BlackholeSink {
    rows_per_second: Option<NonZeroU64>,
    rows: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl PreparedSink for BlackholeSink {
    fn capabilities(&self) -> Vec<SinkCapability> {
        // Writing nothing twice has the effect of writing it once.
        vec![SinkCapability::Idempotent]
    }

    /// Changes are discarded like any other row.
    fn accepts_changes(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        match self.rows_per_second {
            Some(rate) => format!("blackhole: at most {rate} rows/s"),
            None => "blackhole".to_owned(),
        }
    }

    async fn create_writer(&self, ctx: &TaskContext) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(BlackholeWriter {
            label: ctx.label(),
            pacer: self.rows_per_second.map(Pacer::new),
            total: self.rows.clone(),
            written: 0,
        }))
    }
}

/// One subtask's writer: counts rows and, when throttled, sleeps to hold the rate.
struct BlackholeWriter {
    label: String,
    /// Set when `rows_per_second` is.
    pacer: Option<Pacer>,
    /// The factory's counter over all writers.
    total: Arc<AtomicU64>,
    /// Rows this writer was given.
    written: u64,
}

/// Holds a stream of rows to an average rate measured from its first batch.
///
/// Kept apart from the clock so that its arithmetic is tested without sleeping.
#[derive(Debug)]
struct Pacer {
    rate: NonZeroU64,
    /// When the first batch arrived.
    started: Option<Instant>,
    /// Rows admitted so far.
    rows: u64,
}

impl Pacer {
    fn new(rate: NonZeroU64) -> Self {
        Self {
            rate,
            started: None,
            rows: 0,
        }
    }

    /// Admits `rows` more rows at `now`; returns the instant to wait for when they are ahead of
    /// the rate, `None` when they are not.
    fn admit(&mut self, rows: u64, now: Instant) -> Option<Instant> {
        let started = *self.started.get_or_insert(now);
        self.rows = self.rows.saturating_add(rows);
        started
            .checked_add(time_for(self.rows, self.rate))
            .filter(|due| *due > now)
    }
}

/// How long writing `rows` rows takes at `rate` rows per second.
fn time_for(rows: u64, rate: NonZeroU64) -> Duration {
    let rate = rate.get();
    let secs = rows / rate;
    // `rows % rate < rate`, so the nanoseconds stay below one second.
    let nanos = u128::from(rows % rate) * 1_000_000_000 / u128::from(rate);
    Duration::new(secs, nanos as u32)
}

#[async_trait::async_trait]
impl SinkWriter for BlackholeWriter {
    async fn write_batch(&mut self, batch: RecordBatch) -> Result<()> {
        let rows = batch.num_rows() as u64;
        self.written += rows;
        self.total.fetch_add(rows, Ordering::Relaxed);
        if let Some(due) = self
            .pacer
            .as_mut()
            .and_then(|pacer| pacer.admit(rows, Instant::now()))
        {
            tokio::time::sleep_until(due).await;
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        tracing::debug!(writer = %self.label, rows = self.written, "blackhole finished");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use weir_api::{BadRecordPolicy, JobId, OperatorId, SubtaskIndex};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]))
    }

    fn batch(rows: i64) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![Arc::new(Int64Array::from_iter_values(0..rows))],
        )
        .expect("valid batch")
    }

    fn ctx() -> TaskContext {
        TaskContext::new(
            JobId::new("job"),
            OperatorId::new("sink"),
            SubtaskIndex(0),
            1,
        )
    }

    async fn prepare(
        factory: &BlackholeSinkFactory,
        options: serde_json::Value,
    ) -> Result<Arc<dyn PreparedSink>> {
        let id = OperatorId::new("sink");
        let spec = ConnectorSpec {
            operator_id: &id,
            options: &options,
            options_path: "sinks[0].options",
            schema: None,
            bad_records: BadRecordPolicy::Fail,
            reach: weir_api::Reach::Full,
        };
        factory.prepare(spec, schema()).await
    }

    #[tokio::test]
    async fn counts_rows_and_is_idempotent() {
        let factory = BlackholeSinkFactory::new();
        let sink = prepare(&factory, serde_json::Value::Null)
            .await
            .expect("no options is fine");
        assert_eq!(sink.capabilities(), vec![SinkCapability::Idempotent]);
        assert_eq!(sink.describe(), "blackhole");
        let mut a = sink.create_writer(&ctx()).await.expect("writer");
        let mut b = sink.create_writer(&ctx()).await.expect("writer");
        let started = Instant::now();
        a.write_batch(batch(10)).await.expect("write");
        b.write_batch(batch(5)).await.expect("write");
        a.write_batch(batch(0)).await.expect("write");
        a.finish().await.expect("finish");
        b.finish().await.expect("finish");
        // Unthrottled writes never wait on a timer.
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(factory.rows_written(), 15);
        assert_eq!(factory.clone().rows_written(), 15);
    }

    #[tokio::test]
    async fn unknown_option_names_its_path() {
        let err = prepare(
            &BlackholeSinkFactory::new(),
            serde_json::json!({"rows_per_sec": 5}),
        )
        .await
        .expect_err("unknown option");
        let Error::Config { path, message } = err else {
            panic!("expected a config error, got {err}");
        };
        assert!(path.starts_with("sinks[0].options"), "{path}");
        assert!(
            message.contains("unknown field `rows_per_sec`"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn zero_rate_is_rejected() {
        let err = prepare(
            &BlackholeSinkFactory::new(),
            serde_json::json!({"rows_per_second": 0}),
        )
        .await
        .expect_err("zero rate");
        let Error::Config { path, .. } = err else {
            panic!("expected a config error, got {err}");
        };
        assert_eq!(path, "sinks[0].options.rows_per_second");
    }

    #[test]
    fn time_for_is_exact() {
        let rate = NonZeroU64::new(300).expect("non-zero");
        assert_eq!(time_for(0, rate), Duration::ZERO);
        assert_eq!(time_for(150, rate), Duration::from_millis(500));
        assert_eq!(time_for(700, rate), Duration::new(2, 333_333_333));
        let one = NonZeroU64::new(1).expect("non-zero");
        assert_eq!(time_for(u64::MAX, one), Duration::from_secs(u64::MAX));
    }

    #[test]
    fn pacer_holds_the_average_rate() {
        let rate = NonZeroU64::new(100).expect("non-zero");
        let t0 = Instant::now();
        // A writer that is always ready: 1000 rows in batches of 100 take exactly 10 s.
        let mut pacer = Pacer::new(rate);
        let mut now = t0;
        for _ in 0..10 {
            if let Some(due) = pacer.admit(100, now) {
                assert!(due > now);
                now = due;
            }
        }
        assert_eq!(now - t0, Duration::from_secs(10));

        // Input slower than the rate is never delayed.
        let mut pacer = Pacer::new(rate);
        assert_eq!(pacer.admit(50, t0), Some(t0 + Duration::from_millis(500)));
        assert_eq!(pacer.admit(50, t0 + Duration::from_secs(3)), None);
        // ... and the time it fell behind is credit for a later burst, up to the average.
        assert_eq!(pacer.admit(200, t0 + Duration::from_secs(3)), None);
        assert_eq!(
            pacer.admit(100, t0 + Duration::from_secs(3)),
            Some(t0 + Duration::from_secs(4))
        );
    }

    /// The one test that really sleeps (100 ms): it checks that the writer does wait on the
    /// pacer's deadline. Paused tokio time would need tokio's `test-util` feature.
    #[tokio::test]
    async fn throttled_writer_holds_the_rate() {
        // 40 rows at 400 rows/s must take at least 100 ms, whatever the batching.
        let factory = BlackholeSinkFactory::new();
        let sink = prepare(&factory, serde_json::json!({"rows_per_second": 400}))
            .await
            .expect("valid options");
        assert_eq!(sink.describe(), "blackhole: at most 400 rows/s");
        let mut writer = sink.create_writer(&ctx()).await.expect("writer");
        let started = Instant::now();
        for _ in 0..4 {
            writer.write_batch(batch(10)).await.expect("write");
        }
        writer.finish().await.expect("finish");
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(factory.rows_written(), 40);
    }
}
