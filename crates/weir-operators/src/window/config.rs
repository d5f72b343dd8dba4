//! The `window` operator's options, resolved against its input schema into a [`WindowConfig`].

use super::aggregate::AggregateSet;
use super::assign::WindowKind;
use crate::expr::column_index;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::functions_aggregate::average::avg_udaf;
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::type_coercion::functions::fields_with_udf;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::{CastExpr, Column, Literal};
use datafusion::scalar::ScalarValue;
use serde::Deserialize;
use std::sync::Arc;
use weir_api::{DurationMs, Error, Result};

/// Name of the boolean column that marks a re-emitted, corrected window result (policy update).
pub const UPDATE_MARKER: &str = "__weir_window_update";
pub use crate::late::{LATE_OUTPUT, LATE_REASON, REASON_LATE, REASON_NULL_TIME};

/// The options of a `window` operator, as written in a job spec.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowOptions {
    /// The event-time column (Int64 ms or Timestamp).
    pub time_column: String,
    /// The window kind and its sizes.
    pub window: WindowSpec,
    /// Key columns: one result per key and window. The input must be hash-partitioned on
    /// exactly these columns when the operator runs at parallelism > 1.
    #[serde(default)]
    pub key_by: Vec<String>,
    /// The aggregates computed per key and window.
    pub aggregates: Vec<AggregateOption>,
    /// What happens to rows that arrive after their windows fired.
    #[serde(default)]
    pub late: LateOptions,
}

/// A window kind with its sizes.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum WindowSpec {
    /// Tumbling windows of `size`.
    Tumble {
        /// Window length.
        size: DurationMs,
    },
    /// Sliding windows of `size` every `slide`.
    Hop {
        /// Window length.
        size: DurationMs,
        /// Distance between window starts.
        slide: DurationMs,
    },
    /// Growing windows: every `step` up to `max_size`.
    Cumulate {
        /// Growth per emitted window.
        step: DurationMs,
        /// Size of the outer window.
        max_size: DurationMs,
    },
    /// Session windows closed by a `gap` without events of the key.
    Session {
        /// Inactivity gap.
        gap: DurationMs,
    },
}

impl WindowSpec {
    pub(crate) fn kind(self) -> WindowKind {
        match self {
            WindowSpec::Tumble { size } => WindowKind::Tumble {
                size: size.as_i64(),
            },
            WindowSpec::Hop { size, slide } => WindowKind::Hop {
                size: size.as_i64(),
                slide: slide.as_i64(),
            },
            WindowSpec::Cumulate { step, max_size } => WindowKind::Cumulate {
                step: step.as_i64(),
                max_size: max_size.as_i64(),
            },
            WindowSpec::Session { gap } => WindowKind::Session { gap: gap.as_i64() },
        }
    }
}

/// One aggregate: `{function: sum, column: price, as: total}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateOption {
    /// `count`, `sum`, `min`, `max` or `avg`.
    #[serde(alias = "fn")]
    pub function: String,
    /// The aggregated column; `count` without a column counts rows.
    #[serde(default)]
    pub column: Option<String>,
    /// `count` of distinct values (integer columns).
    #[serde(default)]
    pub distinct: bool,
    /// Output column name (default `{function}_{column}`, or `count` for a row count).
    #[serde(default, rename = "as")]
    pub alias: Option<String>,
}

/// The late-data policy of a window operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatePolicyKind {
    /// Late rows are dropped and counted.
    #[default]
    Drop,
    /// Late rows go to the side output `late` with a reason column.
    Route,
    /// Late rows within the allowed lateness update and re-emit their window's result.
    Update,
}

/// `late: {policy: update, allowed_lateness: 5s}`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LateOptions {
    /// The policy (default `drop`).
    #[serde(default)]
    pub policy: LatePolicyKind,
    /// How long after a window fired late rows still update it (policy `update` only).
    #[serde(default)]
    pub allowed_lateness: DurationMs,
}

/// A window operator resolved against its input: what the running operator needs.
#[derive(Debug)]
pub struct WindowConfig {
    /// Index of the event-time column in the input.
    pub time_index: usize,
    /// Name of the event-time column (for error messages).
    pub time_field: String,
    /// Indices of the key columns in the input.
    pub key_indices: Vec<usize>,
    /// Schema of the key columns.
    pub key_schema: SchemaRef,
    /// The window kind.
    pub kind: WindowKind,
    /// The aggregates.
    pub aggregates: Arc<AggregateSet>,
    /// The late policy.
    pub policy: LatePolicyKind,
    /// Allowed lateness in ms (0 unless the policy is update).
    pub allowed_lateness: i64,
    /// Output: keys, `window_start`, `window_end`, aggregates, and the update marker.
    pub output_schema: SchemaRef,
    /// Late side output: the input columns plus [`LATE_REASON`] (policy route).
    pub late_schema: SchemaRef,
    /// The time zone of `window_start`/`window_end` (that of a Timestamp time column).
    pub time_zone: Option<Arc<str>>,
}

impl WindowConfig {
    /// Resolves `options` (found at `path` in the job spec) against the operator's input.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the option's JSON path: unknown columns (listing the input's
    /// columns), a time column that is not Int64/Timestamp, bad sizes, unknown aggregate
    /// functions, duplicate output names, allowed lateness without the update policy.
    pub fn resolve(options: &WindowOptions, input: &SchemaRef, path: &str) -> Result<Self> {
        let time_path = format!("{path}.time_column");
        let time_index = column_index(input, &options.time_column, &time_path)?;
        let time_zone = match input.field(time_index).data_type() {
            DataType::Int64 => None,
            DataType::Timestamp(_, tz) => tz.clone(),
            other => {
                return Err(Error::config(
                    time_path,
                    format!(
                        "column `{}` has type {other}; an event time is Int64 milliseconds or \
                         a Timestamp",
                        options.time_column
                    ),
                ));
            }
        };
        let kind = options.window.kind();
        kind.validate()
            .map_err(|m| Error::config(format!("{path}.window"), m))?;
        if options.late.policy != LatePolicyKind::Update && options.late.allowed_lateness.0 > 0 {
            return Err(Error::config(
                format!("{path}.late.allowed_lateness"),
                "allowed lateness needs `policy: update` (drop and route handle a row as late \
                 as soon as its windows fired)",
            ));
        }

        let mut key_indices = Vec::with_capacity(options.key_by.len());
        let mut key_fields = Vec::with_capacity(options.key_by.len());
        for (i, key) in options.key_by.iter().enumerate() {
            let idx = column_index(input, key, &format!("{path}.key_by[{i}]"))?;
            weir_plan::key_hash::check_key_type(key, input.field(idx).data_type())
                .map_err(|e| Error::config(format!("{path}.key_by[{i}]"), e.to_string()))?;
            key_indices.push(idx);
            key_fields.push(input.field(idx).clone());
        }
        let key_schema = Arc::new(Schema::new(key_fields.clone()));

        if options.aggregates.is_empty() {
            return Err(Error::config(
                format!("{path}.aggregates"),
                "a window needs at least one aggregate, e.g. `{function: count}`",
            ));
        }
        let mut exprs = Vec::with_capacity(options.aggregates.len());
        for (i, agg) in options.aggregates.iter().enumerate() {
            exprs.push(Arc::new(build_aggregate(
                agg,
                input,
                &format!("{path}.aggregates[{i}]"),
            )?));
        }
        let aggregates = Arc::new(AggregateSet::new(
            exprs,
            input,
            &format!("{path}.aggregates"),
        )?);

        let ts_type = DataType::Timestamp(TimeUnit::Millisecond, time_zone.clone());
        let mut fields: Vec<Field> = key_fields;
        fields.push(Field::new("window_start", ts_type.clone(), false));
        fields.push(Field::new("window_end", ts_type, false));
        fields.extend(aggregates.fields().iter().map(|f| f.as_ref().clone()));
        if options.late.policy == LatePolicyKind::Update {
            fields.push(Field::new(UPDATE_MARKER, DataType::Boolean, false));
        }
        let mut seen = std::collections::HashSet::new();
        for f in &fields {
            if !seen.insert(f.name().clone()) {
                return Err(Error::config(
                    format!("{path}.aggregates"),
                    format!(
                        "output column `{}` appears twice; name aggregates with `as`",
                        f.name()
                    ),
                ));
            }
        }

        Ok(Self {
            time_index,
            time_field: options.time_column.clone(),
            key_indices,
            key_schema,
            kind,
            aggregates,
            policy: options.late.policy,
            allowed_lateness: options.late.allowed_lateness.as_i64(),
            output_schema: Arc::new(Schema::new(fields)),
            late_schema: crate::late::late_schema(input),
            time_zone,
        })
    }
}

fn build_aggregate(
    agg: &AggregateOption,
    input: &SchemaRef,
    path: &str,
) -> Result<datafusion::physical_expr::aggregate::AggregateFunctionExpr> {
    let function = agg.function.to_ascii_lowercase();
    let udaf = match function.as_str() {
        "count" => count_udaf(),
        "sum" => sum_udaf(),
        "min" => min_udaf(),
        "max" => max_udaf(),
        "avg" | "mean" => avg_udaf(),
        other => {
            return Err(Error::config(
                format!("{path}.function"),
                format!("unknown aggregate `{other}`; expected count, sum, min, max or avg"),
            ));
        }
    };
    let arg: Arc<dyn PhysicalExpr> = match &agg.column {
        Some(column) => {
            let idx = column_index(input, column, &format!("{path}.column"))?;
            Arc::new(Column::new(column, idx))
        }
        None if function == "count" && !agg.distinct => {
            Arc::new(Literal::new(ScalarValue::Int64(Some(1))))
        }
        None => {
            return Err(Error::config(
                format!("{path}.column"),
                format!("`{function}` needs a column"),
            ));
        }
    };
    // What DataFusion's planner does: cast the argument to the type the function accepts
    // (e.g. sum over Float32 adds in Float64).
    let arg = match arg.return_field(input) {
        Ok(field) => {
            let arg_type = field.data_type().clone();
            let coerced = fields_with_udf(&[field], udaf.as_ref())
                .map_err(|e| Error::config(path, e.to_string()))?;
            match coerced.first().map(|f| f.data_type()) {
                Some(t) if *t != arg_type => {
                    Arc::new(CastExpr::new(arg, t.clone(), None)) as Arc<dyn PhysicalExpr>
                }
                _ => arg,
            }
        }
        Err(e) => return Err(Error::config(path, e.to_string())),
    };
    let alias = agg.alias.clone().unwrap_or_else(|| match &agg.column {
        Some(c) if agg.distinct => format!("{function}_distinct_{c}"),
        Some(c) => format!("{function}_{c}"),
        None => function.clone(),
    });
    AggregateExprBuilder::new(udaf, vec![arg])
        .schema(Arc::clone(input))
        .alias(alias)
        .with_distinct(agg.distinct)
        .build()
        .map_err(|e| Error::config(path, e.to_string()))
}
