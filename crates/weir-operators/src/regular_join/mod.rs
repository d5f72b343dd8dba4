//! The `regular_join` operator: rows of two inputs with equal keys, at any distance in time,
//! as Flink's regular join (INNER, LEFT, RIGHT, FULL OUTER), with a further condition on a
//! pair. Either input may be updating ([`weir_api::changelog`]). See docs/sql.md ("Regular
//! joins").
//!
//! Both inputs' rows are kept by key: per distinct row, how many copies of it are there and, on
//! a side that is padded (the left of a LEFT join), how many rows of the other side it matches.
//! They are held in memory and written to keyed state at barriers and past `buffer_bytes`
//! (`held.rs`). A row that arrives is matched against the other side's rows of its key
//! (the condition is evaluated over all candidate pairs of a batch at once), and:
//!
//! - an insert (`+I`/`+U`) emits a pair with each match, with its own kind; a padded row with no
//!   match is emitted with nulls for the other side (`+I`), and a row of the other side that
//!   had no match until now has its padded row retracted (`-D`) first;
//! - a retraction (`-U`/`-D`) retracts those pairs, with its own kind, and pads what no longer
//!   matches (`+I`). A retraction of a row that is not there is ignored.
//!
//! An INNER join of two insert-only inputs emits only inserts, so its output has no row kind
//! column (it is insert-only, as in Flink); every other join's output is updating.

mod held;
mod operator;
mod row_set;
#[cfg(test)]
mod tests;

use crate::expr::{ExprCompiler, SharedSession};
use crate::interval_join::JoinKind;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;
use operator::RegularJoinOperator;
use serde::Deserialize;
use std::sync::Arc;
use weir_api::changelog::{row_kind_field, row_kind_index};
use weir_api::state::Map;
use weir_api::{
    Error, Operator, OperatorArgs, OperatorFactory, PreparedOperator, Result, TaskContext,
    decode_options,
};

/// Per side: per key, per distinct row, its copies and matches.
const ROWS: [&str; 2] = ["regular_join.left", "regular_join.right"];

/// The job-spec options of `regular_join`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegularJoinOptions {
    /// `inner` (default), `left`, `right` or `full`.
    #[serde(default)]
    pub join: JoinKind,
    /// Key columns of the left input (input 0).
    pub left_keys: Vec<String>,
    /// Key columns of the right input (input 1), pairwise equal to `left_keys`.
    pub right_keys: Vec<String>,
    /// A further condition on a pair (SQL over the left input's columns, then the right's): a
    /// pair with equal keys matches only where it is true. On an outer join it decides which
    /// rows are padded, as an `ON` condition does.
    #[serde(default)]
    pub condition: Option<String>,
    /// How long a row's state lives without being read or written (processing time); unset:
    /// forever.
    #[serde(default)]
    pub state_ttl: Option<weir_api::DurationMs>,
    /// The memory one subtask's rows (both inputs) may take before they are written to keyed
    /// state and released; they are written at every checkpoint barrier anyway. `0` writes
    /// each batch's rows through.
    #[serde(default = "default_buffer_bytes")]
    pub buffer_bytes: u64,
}

/// The default of [`RegularJoinOptions::buffer_bytes`]: 32 MiB.
const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;

fn default_buffer_bytes() -> u64 {
    DEFAULT_BUFFER_BYTES
}

/// Creates `regular_join` operators.
#[derive(Debug, Default)]
pub struct RegularJoinFactory {
    compiler: ExprCompiler,
}

impl RegularJoinFactory {
    /// A factory planning conditions with a session shared with its registry, so that they
    /// see the scalar functions registered there.
    pub fn shared(session: SharedSession) -> Self {
        Self {
            compiler: ExprCompiler::shared(session),
        }
    }
}

/// The options resolved against the inputs.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) join: JoinKind,
    /// Per side, the data columns (all but the row kind column).
    pub(crate) data: [Vec<usize>; 2],
    /// Per side, the data columns' types.
    pub(crate) types: [Vec<DataType>; 2],
    /// Per side, the key columns.
    pub(crate) keys: [Vec<usize>; 2],
    pub(crate) key_names: [Vec<String>; 2],
    /// The left data columns, then the right ones (and the row kind column if updating).
    pub(crate) output: SchemaRef,
    /// Whether the output carries row kinds.
    pub(crate) updating: bool,
    /// Per side, whether its input carries row kinds (retractions).
    pub(crate) updating_inputs: [bool; 2],
    /// The columns of a pair, left then right, all nullable: what `condition` reads.
    pub(crate) pair: SchemaRef,
    pub(crate) condition: Option<Arc<dyn PhysicalExpr>>,
    pub(crate) ttl: Option<weir_api::DurationMs>,
    /// See [`RegularJoinOptions::buffer_bytes`].
    pub(crate) budget: usize,
}

impl OperatorFactory for RegularJoinFactory {
    fn prepare(&self, spec: &OperatorArgs<'_>) -> Result<Arc<dyn PreparedOperator>> {
        let options: RegularJoinOptions = decode_options(spec.options, spec.options_path)?;
        let path = spec.options_path;
        let [left, right] = spec.input_schemas else {
            return Err(Error::config(
                path,
                format!(
                    "regular_join `{}` joins two inputs (left, then right), not {}",
                    spec.operator_id,
                    spec.input_schemas.len()
                ),
            ));
        };
        if matches!(options.join, JoinKind::Semi | JoinKind::Anti) {
            return Err(Error::config(
                format!("{path}.join"),
                "a regular join is inner, left, right or full",
            ));
        }
        if options.left_keys.is_empty() || options.left_keys.len() != options.right_keys.len() {
            return Err(Error::config(
                format!("{path}.right_keys"),
                format!(
                    "a regular join needs as many right keys as left keys, at least one ({} and \
                     {})",
                    options.left_keys.len(),
                    options.right_keys.len()
                ),
            ));
        }
        let mut keys: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (l, r) in options.left_keys.iter().zip(&options.right_keys) {
            let li = crate::expr::column_index(left, l, &format!("{path}.left_keys"))?;
            let ri = crate::expr::column_index(right, r, &format!("{path}.right_keys"))?;
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
        let kinds = [row_kind_index(left), row_kind_index(right)];
        let data: [Vec<usize>; 2] = [0, 1].map(|side| {
            let schema = [left, right][side];
            (0..schema.fields().len())
                .filter(|&i| Some(i) != kinds[side])
                .collect()
        });
        let mut fields: Vec<Field> = Vec::new();
        let mut pair: Vec<Field> = Vec::new();
        for (side, schema) in [left, right].into_iter().enumerate() {
            let padded = options.join.pads(1 - side);
            for &i in &data[side] {
                let f = schema.field(i);
                if pair.iter().any(|g| g.name() == f.name()) {
                    return Err(Error::config(
                        path,
                        format!(
                            "both inputs have a column `{}`: rename one before the join",
                            f.name()
                        ),
                    ));
                }
                pair.push(f.clone().with_nullable(true));
                fields.push(f.clone().with_nullable(f.is_nullable() || padded));
            }
        }
        let updating = options.join != JoinKind::Inner || kinds.iter().any(Option::is_some);
        if updating {
            fields.push(row_kind_field());
        }
        let pair: SchemaRef = Arc::new(Schema::new(pair));
        let condition = options
            .condition
            .as_deref()
            .map(|text| {
                self.compiler
                    .predicate(text, &pair, &format!("{path}.condition"))
            })
            .transpose()?;
        let types = [0, 1].map(|side| {
            let schema = [left, right][side];
            data[side]
                .iter()
                .map(|&i| schema.field(i).data_type().clone())
                .collect()
        });
        Ok(Arc::new(PreparedRegularJoin(Arc::new(Config {
            join: options.join,
            data,
            types,
            keys,
            key_names: [options.left_keys, options.right_keys],
            output: Arc::new(Schema::new(fields)),
            updating,
            updating_inputs: kinds.map(|k| k.is_some()),
            pair,
            condition,
            ttl: options.state_ttl.filter(|d| d.0 > 0),
            budget: usize::try_from(options.buffer_bytes).unwrap_or(usize::MAX),
        }))))
    }
}

/// A `regular_join` resolved against its inputs.
#[derive(Debug)]
pub struct PreparedRegularJoin(Arc<Config>);

impl PreparedOperator for PreparedRegularJoin {
    /// Its buffer decides when rows reach keyed state, not what keyed state holds.
    fn tuning_options(&self) -> Vec<&'static str> {
        vec!["buffer_bytes"]
    }

    fn output_schema(&self) -> SchemaRef {
        Arc::clone(&self.0.output)
    }

    fn describe(&self) -> String {
        format!(
            "regular_join: {:?} on [{}] = [{}]{}",
            self.0.join,
            self.0.key_names[0].join(", "),
            self.0.key_names[1].join(", "),
            if self.0.updating { ", updating" } else { "" }
        )
    }

    fn input_key_columns(&self) -> Option<Vec<Vec<String>>> {
        Some(self.0.key_names.to_vec())
    }

    fn key_columns(&self) -> Option<Vec<String>> {
        Some(self.0.key_names[0].clone())
    }

    fn accepts_changes(&self) -> bool {
        true
    }

    fn reads_event_time(&self) -> bool {
        false
    }

    fn create(&self, ctx: &TaskContext) -> Result<Box<dyn Operator>> {
        let mut store = ctx.keyed_state()?;
        for name in ROWS {
            store.register(
                crate::ttl::descriptor::<Map<Vec<u8>, Vec<u8>>>(name, self.0.ttl).spec(),
            )?;
        }
        Ok(Box::new(RegularJoinOperator::new(
            Arc::clone(&self.0),
            store,
            ctx.state_shard_count.unwrap_or(1),
        )))
    }
}
