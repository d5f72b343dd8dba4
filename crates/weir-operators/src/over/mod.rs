//! The `over_aggregate` operator: Flink's OVER aggregation, `agg(x) OVER (PARTITION BY k ORDER
//! BY ts ROWS|RANGE BETWEEN ... PRECEDING AND CURRENT ROW)`. Every row is emitted once, with the
//! aggregates over its frame, when the watermark passes its time (so every earlier row of its
//! partition is known). See docs/sql.md for the user's view.
//!
//! Rows wait in memory, and in keyed state (a map per partition key and time) from the next
//! checkpoint barrier or once memory outgrows `buffer_bytes`, until the watermark passes them;
//! then each partition's rows are taken in time order (rows of one time in the order of their
//! encoded row, so the result does not depend on arrival order) and folded with the partition's
//! history. Rows at or behind the watermark (or their split's) are late:
//! dropped and counted, as Flink drops them.

mod frame;
mod memory;
mod operator;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use frame::{Function, Kind};
use serde::Deserialize;
use std::sync::Arc;
use weir_api::{
    DurationMs, Error, Operator, OperatorArgs, OperatorFactory, PreparedOperator, Result,
    TaskContext, decode_options,
};

/// The most rows a bounded frame may hold per partition (`ROWS n PRECEDING` with n below it,
/// and the rows of a `RANGE` frame), so one partition's history cannot exhaust memory.
pub const MAX_FRAME_ROWS: usize = 100_000;

/// The job-spec options of `over_aggregate`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverOptions {
    /// The partition columns (`PARTITION BY`); none: one partition, at parallelism 1.
    #[serde(default)]
    pub keys: Vec<String>,
    /// The event-time column the rows are ordered by (`ORDER BY`).
    pub time: String,
    /// Which rows before the current one its aggregates cover.
    pub frame: FrameSpec,
    /// The aggregates, each a column added to the row.
    pub aggregates: Vec<OverAggregate>,
    /// The memory, in bytes, one subtask's waiting rows and cached partition histories may
    /// take before they are written into keyed state (they are at every checkpoint barrier
    /// anyway); 0 writes each batch's rows at once. Default 32 MiB.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: u64,
    /// What happens to late rows: `{policy: drop}` (default) or `{policy: route}` (the side
    /// output `late`).
    #[serde(default)]
    pub late: crate::late::RowLateOptions,
}

/// The default of [`OverOptions::buffer_bytes`]: 32 MiB.
pub const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;

fn default_buffer_bytes() -> u64 {
    DEFAULT_BUFFER_BYTES
}

/// The frame: the rows before the current row its aggregates cover, the current row included.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FrameSpec {
    /// `ROWS BETWEEN n PRECEDING AND CURRENT ROW` (no `preceding`: `UNBOUNDED PRECEDING`).
    Rows {
        /// How many rows before the current one.
        #[serde(default)]
        preceding: Option<u64>,
    },
    /// `RANGE BETWEEN d PRECEDING AND CURRENT ROW`: the rows at most `d` older, and every row
    /// of the same time (no `preceding`: `UNBOUNDED PRECEDING`).
    Range {
        /// How much older.
        #[serde(default)]
        preceding: Option<DurationMs>,
    },
}

/// One aggregate: `{function: sum, column: price, as: total}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverAggregate {
    /// `count`, `sum`, `min`, `max` or `avg`.
    pub function: String,
    /// The aggregated column; `count` without one counts rows.
    #[serde(default)]
    pub column: Option<String>,
    /// The output column's name.
    #[serde(rename = "as")]
    pub name: String,
}

/// Creates `over_aggregate` operators.
#[derive(Debug, Default, Clone, Copy)]
pub struct OverFactory;

/// One aggregate resolved against the input.
#[derive(Debug, Clone)]
struct Resolved {
    function: Function,
    /// The argument column (none for `COUNT(*)`).
    column: Option<usize>,
    kind: Kind,
    /// The type the argument is computed in (`Int64` or `Float64`).
    compute: DataType,
    output: DataType,
}

/// The options resolved against the input, shared by the instances.
#[derive(Debug)]
struct OverConfig {
    input: SchemaRef,
    types: Vec<DataType>,
    output: SchemaRef,
    keys: Vec<usize>,
    key_names: Vec<String>,
    time: usize,
    frame: FrameSpec,
    aggregates: Vec<Resolved>,
    buffer_bytes: usize,
    late: crate::late::RowLatePolicy,
}

impl OverFactory {
    fn resolve(options: &OverAggregate, input: &Schema, path: &str) -> Result<Resolved> {
        let function = match (
            options.function.to_ascii_lowercase().as_str(),
            &options.column,
        ) {
            ("count", None) => Function::CountRows,
            ("count", Some(_)) => Function::Count,
            ("sum", _) => Function::Sum,
            ("min", _) => Function::Min,
            ("max", _) => Function::Max,
            ("avg", _) => Function::Avg,
            (other, _) => {
                return Err(Error::config(
                    format!("{path}.function"),
                    format!("unknown aggregate `{other}`; expected count, sum, min, max or avg"),
                ));
            }
        };
        let Some(name) = &options.column else {
            if function != Function::CountRows {
                return Err(Error::config(
                    format!("{path}.column"),
                    format!("{} needs a column", options.function),
                ));
            }
            return Ok(Resolved {
                function,
                column: None,
                kind: Kind::Int,
                compute: DataType::Int64,
                output: DataType::Int64,
            });
        };
        let column = crate::expr::column_index(input, name, &format!("{path}.column"))?;
        let data_type = input.field(column).data_type().clone();
        let integer = data_type.is_integer() && data_type != DataType::UInt64;
        let float = matches!(data_type, DataType::Float32 | DataType::Float64);
        let time = matches!(data_type, DataType::Timestamp(..));
        let (kind, compute) = if float {
            (Kind::Float, DataType::Float64)
        } else {
            (Kind::Int, DataType::Int64)
        };
        let output = match function {
            Function::Count | Function::CountRows => DataType::Int64,
            Function::Sum if integer => DataType::Int64,
            Function::Sum | Function::Min | Function::Max if float => data_type.clone(),
            Function::Min | Function::Max if integer || time => data_type.clone(),
            Function::Avg if integer || float => DataType::Float64,
            _ => {
                return Err(Error::config(
                    format!("{path}.column"),
                    format!(
                        "{} of `{name}` ({data_type}): OVER aggregates take integers and \
                         floating-point numbers (MIN and MAX also timestamps), and COUNT any type",
                        options.function
                    ),
                ));
            }
        };
        Ok(Resolved {
            function,
            column: Some(column),
            kind,
            compute,
            output,
        })
    }
}

impl OperatorFactory for OverFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: OverOptions = decode_options(spec.options, spec.options_path)?;
        let input =
            crate::expr::single_input("over_aggregate", spec.operator_id, spec.input_schemas)?;
        let path = spec.options_path;
        let column = |name: &str, option: &str| {
            crate::expr::column_index(&input, name, &format!("{path}.{option}"))
        };
        let keys = options
            .keys
            .iter()
            .map(|k| column(k, "keys"))
            .collect::<Result<Vec<_>>>()?;
        let time = column(&options.time, "time")?;
        if !matches!(
            input.field(time).data_type(),
            DataType::Int64 | DataType::Timestamp(..)
        ) {
            return Err(Error::config(
                format!("{path}.time"),
                "the event-time column is a TIMESTAMP or BIGINT milliseconds",
            ));
        }
        if let FrameSpec::Rows { preceding: Some(n) } = options.frame
            && n >= MAX_FRAME_ROWS as u64
        {
            return Err(Error::config(
                format!("{path}.frame.preceding"),
                format!("a ROWS frame covers fewer than {MAX_FRAME_ROWS} rows, not {n}"),
            ));
        }
        if options.aggregates.is_empty() {
            return Err(Error::config(
                format!("{path}.aggregates"),
                "name at least one aggregate",
            ));
        }
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut aggregates = Vec::with_capacity(options.aggregates.len());
        for (i, a) in options.aggregates.iter().enumerate() {
            let resolved = Self::resolve(a, &input, &format!("{path}.aggregates[{i}]"))?;
            if fields.iter().any(|f| f.name() == &a.name) {
                return Err(Error::config(
                    format!("{path}.aggregates[{i}].as"),
                    format!("the output already has a column `{}`", a.name),
                ));
            }
            let nullable = !matches!(resolved.function, Function::Count | Function::CountRows);
            fields.push(Field::new(&a.name, resolved.output.clone(), nullable));
            aggregates.push(resolved);
        }
        Ok(Arc::new(PreparedOver(Arc::new(OverConfig {
            types: input
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            input,
            output: Arc::new(Schema::new(fields)),
            keys,
            key_names: options.keys,
            time,
            frame: options.frame,
            aggregates,
            buffer_bytes: usize::try_from(options.buffer_bytes).unwrap_or(usize::MAX),
            late: options.late.policy,
        }))))
    }
}

/// An `over_aggregate` resolved against its input.
#[derive(Debug)]
pub struct PreparedOver(Arc<OverConfig>);

impl PreparedOperator for PreparedOver {
    /// Its buffer decides when rows reach keyed state, not what keyed state holds.
    fn tuning_options(&self) -> Vec<&'static str> {
        vec!["buffer_bytes"]
    }

    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn side_outputs(&self) -> Vec<weir_api::SideOutput> {
        crate::late::late_output(self.0.late, crate::late::LATE_OUTPUT, &self.0.input)
            .into_iter()
            .collect()
    }

    fn describe(&self) -> String {
        format!(
            "over_aggregate: {} aggregates per [{}] over {:?} by `{}`",
            self.0.aggregates.len(),
            self.0.key_names.join(", "),
            self.0.frame,
            self.0.input.field(self.0.time).name()
        )
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names.clone())
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(operator::OverOperator::new(
            Arc::clone(&self.0),
            ctx,
        )?))
    }
}
