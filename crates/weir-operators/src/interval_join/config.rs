//! The `interval_join` operator's options, checked against its two input schemas.

use crate::expr::ExprCompiler;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use serde::Deserialize;
use std::sync::Arc;
use weir_api::{Error, OperatorArgs, Result, decode_options};

/// Which unmatched rows an interval join also emits, padded with nulls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JoinKind {
    /// Only matched pairs.
    #[default]
    Inner,
    /// Also every left row that matched nothing.
    Left,
    /// Also every right row that matched nothing.
    Right,
    /// Also the unmatched rows of both sides.
    Full,
    /// Each left row that matches a right row, once, with the left's columns only (`EXISTS`).
    Semi,
    /// Each left row that matches no right row, once its bound passed, with the left's
    /// columns only (`NOT EXISTS`).
    Anti,
}

impl JoinKind {
    /// Whether unmatched rows of `side` (0 left, 1 right) are emitted.
    pub fn pads(self, side: usize) -> bool {
        matches!(
            (self, side),
            (JoinKind::Left | JoinKind::Full | JoinKind::Anti, 0)
                | (JoinKind::Right | JoinKind::Full, 1)
        )
    }

    /// Whether the rows of `side` remember that they matched.
    pub fn tracks(self, side: usize) -> bool {
        self.pads(side) || (self == JoinKind::Semi && side == 0)
    }

    /// Whether the output has the right input's columns (not for semi and anti joins).
    pub fn emits_right(self) -> bool {
        !matches!(self, JoinKind::Semi | JoinKind::Anti)
    }
}

/// The job-spec options of `interval_join` (docs/sql.md, interval joins).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalJoinOptions {
    /// `inner` (default), `left`, `right` or `full`.
    #[serde(default)]
    pub join: JoinKind,
    /// Key columns of the left input (input 0).
    pub left_keys: Vec<String>,
    /// Key columns of the right input (input 1), pairwise equal to `left_keys`.
    pub right_keys: Vec<String>,
    /// The left input's event-time column.
    pub left_time: String,
    /// The right input's event-time column.
    pub right_time: String,
    /// A pair matches when `right_time - left_time` is at least this many milliseconds.
    pub lower: i64,
    /// ... and at most this many.
    pub upper: i64,
    /// A further condition on a pair (SQL over the left input's columns, then the right's):
    /// a pair within the bounds matches only where it is true. On an outer join it decides
    /// which rows are padded, as an `ON` condition does.
    #[serde(default)]
    pub condition: Option<String>,
    /// The memory, in bytes, one subtask's arriving rows may take before they are written
    /// into keyed state (they are at every checkpoint barrier anyway); 0 writes each batch's
    /// rows at once. Default 32 MiB.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: u64,
    /// What happens to late rows of either input: `{policy: drop}` (default) or
    /// `{policy: route}` (the side outputs [`LATE_LEFT`] and [`LATE_RIGHT`]).
    #[serde(default)]
    pub late: crate::late::RowLateOptions,
}

/// The side output of the left input's late rows (policy route).
pub const LATE_LEFT: &str = "late_left";
/// The side output of the right input's late rows (policy route).
pub const LATE_RIGHT: &str = "late_right";

/// The default of [`IntervalJoinOptions::buffer_bytes`]: 32 MiB, so that a join whose sides
/// run far apart in event time keeps most of its rows in keyed state, not in memory.
pub const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;

fn default_buffer_bytes() -> u64 {
    DEFAULT_BUFFER_BYTES
}

/// The options resolved against the inputs.
#[derive(Debug)]
pub struct IntervalJoinConfig {
    /// The join type.
    pub join: JoinKind,
    /// Per side, the input schema.
    pub inputs: [SchemaRef; 2],
    /// Per side, the indices of the key columns.
    pub keys: [Vec<usize>; 2],
    /// Per side, the key column names (what each input must be hashed on).
    pub key_names: [Vec<String>; 2],
    /// Per side, the index of the event-time column.
    pub time: [usize; 2],
    /// Bounds of `right_time - left_time`, in ms.
    pub lower: i64,
    /// See `lower`.
    pub upper: i64,
    /// The left columns, then the right ones; a side's columns are nullable where the other
    /// side's unmatched rows are padded.
    pub output: SchemaRef,
    /// The columns of a pair, left then right, all nullable: what `condition` reads.
    pub pair: SchemaRef,
    /// The planned `condition`.
    pub condition: Option<Arc<dyn PhysicalExpr>>,
    /// See [`IntervalJoinOptions::buffer_bytes`].
    pub buffer_bytes: usize,
    /// What happens to late rows.
    pub late: crate::late::RowLatePolicy,
}

impl IntervalJoinConfig {
    /// Resolves the options of `spec`.
    ///
    /// # Errors
    /// A config error naming the option for an unknown column, key columns of different types
    /// or counts, bounds in the wrong order, inputs that share a column name, or not exactly
    /// two inputs.
    pub fn resolve(spec: &OperatorArgs<'_>, compiler: &ExprCompiler) -> Result<Self> {
        let options: IntervalJoinOptions = decode_options(spec.options, spec.options_path)?;
        let path = spec.options_path;
        let [left, right] = spec.input_schemas else {
            return Err(Error::config(
                path,
                format!(
                    "interval_join `{}` joins two inputs (left, then right), not {}",
                    spec.operator_id,
                    spec.input_schemas.len()
                ),
            ));
        };
        let column = |schema: &Schema, name: &str, option: &str| {
            crate::expr::column_index(schema, name, &format!("{path}.{option}"))
        };
        if options.left_keys.is_empty() || options.left_keys.len() != options.right_keys.len() {
            return Err(Error::config(
                format!("{path}.right_keys"),
                format!(
                    "an interval join needs as many right keys as left keys, at least one ({} \
                     and {})",
                    options.left_keys.len(),
                    options.right_keys.len()
                ),
            ));
        }
        let mut keys: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (l, r) in options.left_keys.iter().zip(&options.right_keys) {
            let (li, ri) = (
                column(left, l, "left_keys")?,
                column(right, r, "right_keys")?,
            );
            let (lt, rt) = (left.field(li).data_type(), right.field(ri).data_type());
            if lt != rt {
                return Err(Error::config(
                    format!("{path}.right_keys"),
                    format!("key `{l}` is {lt} on the left but `{r}` is {rt} on the right"),
                ));
            }
            weir_plan::key_hash::check_key_type(l, lt)
                .map_err(|e| Error::config(format!("{path}.left_keys"), e.to_string()))?;
            keys[0].push(li);
            keys[1].push(ri);
        }
        let time = [
            column(left, &options.left_time, "left_time")?,
            column(right, &options.right_time, "right_time")?,
        ];
        for (side, (schema, option)) in [(left, "left_time"), (right, "right_time")]
            .into_iter()
            .enumerate()
        {
            let t = schema.field(time[side]).data_type();
            if !matches!(t, DataType::Int64 | DataType::Timestamp(..)) {
                return Err(Error::config(
                    format!("{path}.{option}"),
                    format!("an event-time column is a TIMESTAMP or BIGINT milliseconds, not {t}"),
                ));
            }
        }
        if options.lower > options.upper {
            return Err(Error::config(
                format!("{path}.lower"),
                format!(
                    "the lower bound {} ms is above the upper bound {} ms: no pair could match",
                    options.lower, options.upper
                ),
            ));
        }
        let mut fields: Vec<Field> = Vec::new();
        let mut pair: Vec<Field> = Vec::new();
        for (side, schema) in [left, right].into_iter().enumerate() {
            let padded = options.join.pads(1 - side) && options.join.emits_right();
            for f in schema.fields() {
                if pair.iter().any(|g| g.name() == f.name()) {
                    return Err(Error::config(
                        path,
                        format!(
                            "both inputs have a column `{}`: rename one before the join",
                            f.name()
                        ),
                    ));
                }
                pair.push(f.as_ref().clone().with_nullable(true));
                if side == 0 || options.join.emits_right() {
                    fields.push(f.as_ref().clone().with_nullable(f.is_nullable() || padded));
                }
            }
        }
        let pair: SchemaRef = Arc::new(Schema::new(pair));
        let condition = options
            .condition
            .as_deref()
            .map(|text| compiler.predicate(text, &pair, &format!("{path}.condition")))
            .transpose()?;
        Ok(Self {
            join: options.join,
            inputs: [Arc::clone(left), Arc::clone(right)],
            keys,
            key_names: [options.left_keys, options.right_keys],
            time,
            lower: options.lower,
            upper: options.upper,
            output: Arc::new(Schema::new(fields)),
            pair,
            condition,
            buffer_bytes: usize::try_from(options.buffer_bytes).unwrap_or(usize::MAX),
            late: options.late.policy,
        })
    }

    /// How far behind the slower input's watermark the output's stays: a row emitted later
    /// is never behind it. Matched pairs come when their later row arrives, so a pair's two
    /// times are at least the watermark minus the bounds' reach; padded rows leave the state
    /// up to two buckets after their bound passed.
    pub fn output_delay(&self, bucket: i64) -> i64 {
        let reach = self.upper.max(-self.lower).max(0);
        let padding = if matches!(self.join, JoinKind::Inner | JoinKind::Semi) {
            0
        } else {
            bucket.saturating_mul(2)
        };
        reach.saturating_add(padding).saturating_add(1)
    }

    /// The width of the time buckets rows are kept in: the join interval's, at least 1 s, so
    /// a probe reads at most two buckets of the other side.
    pub fn bucket_ms(&self) -> i64 {
        self.upper
            .saturating_sub(self.lower)
            .saturating_add(1)
            .max(1000)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use weir_api::OperatorId;

    fn schema(fields: &[(&str, DataType)]) -> SchemaRef {
        Arc::new(Schema::new(
            fields
                .iter()
                .map(|(n, t)| Field::new(*n, t.clone(), false))
                .collect::<Vec<_>>(),
        ))
    }

    fn resolve(options: serde_json::Value, right_key: DataType) -> Result<IntervalJoinConfig> {
        let inputs = [
            schema(&[("k", DataType::Int64), ("ts", DataType::Int64)]),
            schema(&[("k2", right_key), ("ts2", DataType::Int64)]),
        ];
        IntervalJoinConfig::resolve(
            &OperatorArgs {
                operator_id: &OperatorId::new("j"),
                options: &options,
                options_path: "operators[0].options",
                input_schemas: &inputs,
            },
            &ExprCompiler::default(),
        )
    }

    fn options(join: &str, lower: i64, upper: i64) -> serde_json::Value {
        serde_json::json!({
            "join": join, "left_keys": ["k"], "right_keys": ["k2"],
            "left_time": "ts", "right_time": "ts2", "lower": lower, "upper": upper,
        })
    }

    #[test]
    fn an_outer_side_is_nullable_in_the_output_and_bounds_set_the_delay() {
        let cfg = resolve(options("left", -2_000, 3_000), DataType::Int64).unwrap();
        let nullable: Vec<bool> = cfg
            .output
            .fields()
            .iter()
            .map(|f| f.is_nullable())
            .collect();
        assert_eq!(
            nullable,
            [false, false, true, true],
            "the right side is padded"
        );
        assert_eq!(cfg.bucket_ms(), 5_001);
        assert_eq!(cfg.output_delay(cfg.bucket_ms()), 3_000 + 2 * 5_001 + 1);
        let inner = resolve(options("inner", 0, 5), DataType::Int64).unwrap();
        assert_eq!((inner.bucket_ms(), inner.output_delay(1_000)), (1_000, 6));
    }

    #[test]
    fn bad_options_name_what_is_wrong() {
        let err = |o, t| resolve(o, t).unwrap_err().to_string();
        let e = err(options("inner", 0, 5), DataType::Utf8);
        assert!(
            e.contains("operators[0].options.right_keys") && e.contains("Int64"),
            "{e}"
        );
        let e = err(options("inner", 5, 0), DataType::Int64);
        assert!(
            e.contains("operators[0].options.lower") && e.contains("above"),
            "{e}"
        );
        let mut unknown = options("inner", 0, 5);
        unknown["left_time"] = serde_json::json!("nope");
        let e = err(unknown, DataType::Int64);
        assert!(
            e.contains("left_time") && e.contains("no column `nope`"),
            "{e}"
        );
        let mut kind = options("inner", 0, 5);
        kind["join"] = serde_json::json!("cross");
        assert!(err(kind, DataType::Int64).contains("join"));
        let mut condition = options("left", 0, 5);
        condition["condition"] = serde_json::json!("k + ts2");
        let e = err(condition, DataType::Int64);
        assert!(
            e.contains("operators[0].options.condition") && e.contains("boolean"),
            "{e}"
        );
    }

    #[test]
    fn a_condition_reads_both_sides_columns_also_of_a_semi_join() {
        let mut semi = options("semi", 0, 5);
        semi["condition"] = serde_json::json!("ts + 1 < ts2");
        let cfg = resolve(semi, DataType::Int64).unwrap();
        assert!(cfg.condition.is_some());
        assert_eq!(
            cfg.output.fields().len(),
            2,
            "a semi join emits the left columns"
        );
        assert_eq!(cfg.pair.fields().len(), 4);
    }
}
