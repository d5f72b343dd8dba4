//! The `window_tvf` operator: Flink's window table functions (`TUMBLE`, `HOP`, `CUMULATE`) on
//! their own, without an aggregation: every row once per window it belongs to, with the
//! columns `window_start`, `window_end` and `window_time` (`window_end - 1 ms`) added. What
//! follows it decides what a window means (a window Top-N ranks the rows of each window, a
//! window join joins them); see docs/sql.md.
//!
//! The operator holds no state and drops nothing but rows without an event time (counted as
//! dropped, as a window counts them): a row's windows depend only on its own time, so whether
//! a row is late for its window is for the operator after it to judge.

use crate::window::{WindowKind, WindowSpec, assign_windows};
use arrow::array::{Array, ArrayRef, TimestampMillisecondArray, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use serde::Deserialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, Output, PreparedOperator, Result, TaskContext,
    decode_options,
};

/// The names of the columns the operator adds, in their order.
pub const WINDOW_COLUMNS: [&str; 3] = ["window_start", "window_end", "window_time"];

/// The job-spec options of `window_tvf`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowTvfOptions {
    /// The event-time column (TIMESTAMP or BIGINT milliseconds).
    pub time_column: String,
    /// The windows: tumble, hop or cumulate (sessions depend on other rows: they exist only
    /// with an aggregation, in the `window` operator).
    pub window: WindowSpec,
}

/// Creates `window_tvf` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowTvfFactory;

impl OperatorFactory for WindowTvfFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: WindowTvfOptions = decode_options(spec.options, spec.options_path)?;
        let input = crate::expr::single_input("window_tvf", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        let time = crate::expr::column_index(
            &input,
            &options.time_column,
            &format!("{path}.time_column"),
        )?;
        let time_zone = match input.field(time).data_type() {
            DataType::Int64 => None,
            DataType::Timestamp(_, tz) => tz.clone(),
            other => {
                return Err(Error::config(
                    format!("{path}.time_column"),
                    format!(
                        "column `{}` has type {other}; an event time is a TIMESTAMP or BIGINT \
                         milliseconds",
                        options.time_column
                    ),
                ));
            }
        };
        let kind = options.window.kind();
        if matches!(kind, WindowKind::Session { .. }) {
            return Err(Error::config(
                format!("{path}.window"),
                "session windows depend on the other rows of their key; they exist only with \
                 an aggregation (the `window` operator)",
            ));
        }
        kind.validate()
            .map_err(|m| Error::config(format!("{path}.window"), m))?;
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        let bound = DataType::Timestamp(TimeUnit::Millisecond, time_zone.clone());
        for name in WINDOW_COLUMNS {
            if input.index_of(name).is_ok() {
                return Err(Error::config(
                    path.to_owned(),
                    format!("the input already has a column `{name}`, which the windows add"),
                ));
            }
            fields.push(Field::new(name, bound.clone(), false));
        }
        Ok(Arc::new(PreparedWindowTvf(Arc::new(WindowTvfConfig {
            output: Arc::new(Schema::new(fields)),
            time,
            time_name: options.time_column,
            time_zone,
            kind,
        }))))
    }
}

/// A `window_tvf` resolved against its input.
#[derive(Debug)]
pub struct PreparedWindowTvf(Arc<WindowTvfConfig>);

#[derive(Debug)]
struct WindowTvfConfig {
    output: SchemaRef,
    time: usize,
    time_name: String,
    time_zone: Option<Arc<str>>,
    kind: WindowKind,
}

impl PreparedOperator for PreparedWindowTvf {
    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn describe(&self) -> String {
        format!("window_tvf: {:?} over `{}`", self.0.kind, self.0.time_name)
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(WindowTvfOperator {
            cfg: Arc::clone(&self.0),
            dropped: Arc::clone(&ctx.dropped_rows),
        }))
    }
}

/// A running `window_tvf`.
struct WindowTvfOperator {
    cfg: Arc<WindowTvfConfig>,
    dropped: Arc<AtomicU64>,
}

impl Operator for WindowTvfOperator {
    fn process_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Output) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let cfg = &self.cfg;
        let times = crate::event_time::event_times_ms(batch.column(cfg.time), &cfg.time_name)?;
        let nulls = times.null_count();
        if nulls > 0 {
            self.dropped.fetch_add(nulls as u64, Ordering::Relaxed);
        }
        let assigned = assign_windows(cfg.kind, &times, &cfg.time_name)?;
        if assigned.is_empty() {
            return Ok(());
        }
        let rows = UInt32Array::from(assigned.row);
        let mut columns = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &rows, None))
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()
            .map_err(|e| Error::arrow("repeating rows per window", e))?;
        let bound = |values: Vec<i64>| -> ArrayRef {
            Arc::new(
                TimestampMillisecondArray::from(values).with_timezone_opt(cfg.time_zone.clone()),
            )
        };
        let window_time: Vec<i64> = assigned.end.iter().map(|end| end - 1).collect();
        columns.push(bound(assigned.start));
        columns.push(bound(assigned.end));
        columns.push(bound(window_time));
        let batch = RecordBatch::try_new(Arc::clone(&cfg.output), columns)
            .map_err(|e| Error::arrow("adding window columns", e))?;
        out.emit(batch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use weir_api::{Emitted, JobId, OperatorId, SubtaskIndex};

    fn prepare(window: serde_json::Value) -> Result<Arc<dyn PreparedOperator>> {
        let input = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Int64, true),
            Field::new("name", DataType::Utf8, false),
        ]));
        let options = serde_json::json!({ "time_column": "ts", "window": window });
        let id = OperatorId::new("w");
        WindowTvfFactory.prepare(&OperatorArgs {
            operator_id: &id,
            options: &options,
            options_path: "operators[0].options",
            input_schemas: &[input],
        })
    }

    fn run(window: serde_json::Value, ts: Vec<Option<i64>>) -> Vec<(String, i64, i64, i64)> {
        let prepared = prepare(window).unwrap();
        let ctx = TaskContext::new(JobId::new("j"), OperatorId::new("w"), SubtaskIndex(0), 1);
        let mut op = prepared.create(&ctx).unwrap();
        let names: Vec<String> = (0..ts.len()).map(|i| format!("r{i}")).collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Int64, true),
                Field::new("name", DataType::Utf8, false),
            ])),
            vec![
                Arc::new(Int64Array::from(ts)),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap();
        let mut out = Output::new();
        op.process_batch(0, batch, &mut out).unwrap();
        let mut rows = Vec::new();
        for emitted in out.drain() {
            let Emitted::Data { port: 0, batch: b } = emitted else {
                panic!("unexpected emission");
            };
            let name = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            let bound = |i: usize| {
                b.column(i)
                    .as_any()
                    .downcast_ref::<TimestampMillisecondArray>()
                    .unwrap()
                    .clone()
            };
            let (s, e, t) = (bound(2), bound(3), bound(4));
            for r in 0..b.num_rows() {
                rows.push((name.value(r).to_owned(), s.value(r), e.value(r), t.value(r)));
            }
        }
        rows.sort();
        rows
    }

    #[test]
    fn tumble_adds_the_bounds_and_drops_rows_without_a_time() {
        let rows = run(
            serde_json::json!({"type": "tumble", "size": 10}),
            vec![Some(3), None, Some(-1), Some(10)],
        );
        assert_eq!(
            rows,
            vec![
                ("r0".into(), 0, 10, 9),
                ("r2".into(), -10, 0, -1),
                ("r3".into(), 10, 20, 19)
            ]
        );
    }

    #[test]
    fn hop_repeats_a_row_per_window() {
        let rows = run(
            serde_json::json!({"type": "hop", "size": 10, "slide": 5}),
            vec![Some(7)],
        );
        assert_eq!(
            rows,
            vec![("r0".into(), 0, 10, 9), ("r0".into(), 5, 15, 14)]
        );
    }

    #[test]
    fn sessions_are_refused_with_the_option_path() {
        let err = prepare(serde_json::json!({"type": "session", "gap": 10}))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("operators[0].options.window"), "{err}");
        assert!(err.contains("aggregation"), "{err}");
    }
}
