//! Vectorized aggregation of window contents with DataFusion's group accumulators.
//!
//! A [`GroupSpace`] is the set of groups (distinct key values) of one window, or of all open
//! sessions: DataFusion's `GroupValues` interns the key columns of a batch into group indices
//! and one `GroupsAccumulator` per aggregate updates every group at once. Nothing is evaluated
//! row by row. Partial states ([`GroupSpace::drain`]) are what windows persist in keyed state
//! and what merging (sessions, late updates) combines.
//!
//! Result types follow DataFusion (`count` -> Int64, integer `sum` -> Int64, `min`/`max` keep
//! the input type, `avg` -> Float64) with one exception: `sum` of Float32 is returned as
//! Float32 (accumulated in Float64), so a Float32 column keeps a Float32-compatible schema.

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::CastExpr;
use datafusion::physical_plan::aggregates::group_values::{GroupValues, new_group_values};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use std::sync::Arc;
use weir_api::{Error, Result};

fn df(context: &str, e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("{context}: {e}"))
}

/// The aggregates of one window operator: DataFusion aggregate expressions over its input.
#[derive(Debug)]
pub struct AggregateSet {
    exprs: Vec<Arc<AggregateFunctionExpr>>,
    /// Output field per aggregate (after the Float32 `sum` rule).
    fields: Vec<FieldRef>,
    /// Partial-state fields per aggregate.
    state_fields: Vec<Vec<FieldRef>>,
}

impl AggregateSet {
    /// Wraps aggregate expressions built for the operator's input schema.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] at `path` when an aggregate has no vectorized group accumulator in
    /// DataFusion (e.g. `count(distinct)` over a non-integer column).
    pub fn new(exprs: Vec<Arc<AggregateFunctionExpr>>, input: &Schema, path: &str) -> Result<Self> {
        let mut fields = Vec::with_capacity(exprs.len());
        let mut state_fields = Vec::with_capacity(exprs.len());
        for e in &exprs {
            if !e.groups_accumulator_supported() {
                return Err(Error::config(
                    path,
                    format!(
                        "aggregate {} is not supported in windows: DataFusion has no \
                         vectorized group accumulator for it{}",
                        e.name(),
                        if e.is_distinct() {
                            " (distinct counts are supported over integer columns)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            let field = e.field();
            let out_type = output_type(e, field.data_type(), input);
            fields.push(Arc::new(
                Field::new(field.name(), out_type, field.is_nullable())
                    .with_metadata(field.metadata().clone()),
            ));
            state_fields.push(e.state_fields().map_err(|e| df("aggregate state", e))?);
        }
        Ok(Self {
            exprs,
            fields,
            state_fields,
        })
    }

    /// The output fields, one per aggregate, in order.
    pub fn fields(&self) -> &[FieldRef] {
        &self.fields
    }

    /// The data types of every aggregate's partial state, flattened in aggregate order.
    pub fn state_types(&self) -> Vec<DataType> {
        self.state_fields
            .iter()
            .flatten()
            .map(|f| f.data_type().clone())
            .collect()
    }

    /// Number of partial-state columns per aggregate.
    pub fn state_widths(&self) -> Vec<usize> {
        self.state_fields.iter().map(Vec::len).collect()
    }

    /// Evaluates every aggregate's argument expressions on `batch`.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when an argument cannot be evaluated (arguments are columns and
    /// literals checked against the schema when the operator was prepared).
    pub fn arguments(&self, batch: &RecordBatch) -> Result<Vec<Vec<ArrayRef>>> {
        let rows = batch.num_rows();
        self.exprs
            .iter()
            .map(|e| {
                e.expressions()
                    .iter()
                    .map(|arg| {
                        arg.evaluate(batch)
                            .and_then(|v| v.into_array(rows))
                            .map_err(|err| {
                                Error::Internal(format!("argument of {}: {err}", e.name()))
                            })
                    })
                    .collect()
            })
            .collect()
    }

    fn accumulators(&self) -> Result<Vec<Box<dyn GroupsAccumulator>>> {
        self.exprs
            .iter()
            .map(|e| {
                e.create_groups_accumulator()
                    .map_err(|err| df("creating an accumulator", err))
            })
            .collect()
    }

    /// Final values of the groups whose partial states are `states` (one row per group), in
    /// order, converted to the output types.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion rejects the states (a bug).
    pub fn evaluate_states(&self, states: &[Vec<ArrayRef>]) -> Result<Vec<ArrayRef>> {
        let rows = states
            .first()
            .and_then(|s| s.first())
            .map_or(0, |a| a.len());
        let groups: Vec<usize> = (0..rows).collect();
        let mut accs = self.accumulators()?;
        let mut out = Vec::with_capacity(accs.len());
        for ((acc, state), field) in accs.iter_mut().zip(states).zip(&self.fields) {
            acc.merge_batch(state, &groups, rows)
                .map_err(|e| df("merging partial states", e))?;
            let values = acc
                .evaluate(EmitTo::All)
                .map_err(|e| df("evaluating an aggregate", e))?;
            out.push(to_type(values, field.data_type())?);
        }
        Ok(out)
    }
}

/// The output type of an aggregate: DataFusion's, except `sum(Float32)` stays Float32.
fn output_type(e: &AggregateFunctionExpr, df_type: &DataType, input: &Schema) -> DataType {
    // The argument as written, before the cast to the accumulator's type.
    let arg_f32 = e.expressions().first().is_some_and(|arg| {
        let written = arg
            .downcast_ref::<CastExpr>()
            .map_or(arg, |cast| cast.expr());
        written.data_type(input).ok() == Some(DataType::Float32)
    });
    if e.fun().name() == "sum" && *df_type == DataType::Float64 && arg_f32 {
        DataType::Float32
    } else {
        df_type.clone()
    }
}

fn to_type(values: ArrayRef, target: &DataType) -> Result<ArrayRef> {
    if values.data_type() == target {
        return Ok(values);
    }
    cast(&values, target).map_err(|e| df("converting an aggregate result", e))
}

/// The groups of one window (or of all open sessions) with their accumulators.
pub struct GroupSpace {
    set: Arc<AggregateSet>,
    /// `None` when the operator has no key: then there is at most one group.
    keys: Option<Box<dyn GroupValues>>,
    key_schema: SchemaRef,
    accs: Vec<Box<dyn GroupsAccumulator>>,
    len: usize,
    scratch: Vec<usize>,
}

impl std::fmt::Debug for GroupSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupSpace")
            .field("groups", &self.len)
            .finish()
    }
}

impl GroupSpace {
    /// An empty group space for keys of `key_schema` (empty schema: one global group).
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion cannot create the group table or accumulators.
    pub fn new(set: Arc<AggregateSet>, key_schema: SchemaRef) -> Result<Self> {
        let keys = if key_schema.fields().is_empty() {
            None
        } else {
            Some(
                new_group_values(Arc::clone(&key_schema), &GroupOrdering::None)
                    .map_err(|e| df("creating the group table", e))?,
            )
        };
        let accs = set.accumulators()?;
        Ok(Self {
            set,
            keys,
            key_schema,
            accs,
            len: 0,
            scratch: Vec::new(),
        })
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the space has no group.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Interns `keys` (one row per input row) into group indices, returned in `self.scratch`.
    fn intern(&mut self, keys: &[ArrayRef], rows: usize) -> Result<()> {
        self.scratch.clear();
        match &mut self.keys {
            Some(table) => {
                table
                    .intern(keys, &mut self.scratch)
                    .map_err(|e| df("grouping keys", e))?;
                self.len = table.len();
            }
            None => {
                self.scratch.resize(rows, 0);
                if rows > 0 {
                    self.len = 1;
                }
            }
        }
        Ok(())
    }

    /// Adds rows: `keys` and every aggregate's `args` have one entry per row. Returns the
    /// group index of each row (valid until the next call).
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion rejects the arrays.
    pub fn update(&mut self, keys: &[ArrayRef], args: &[Vec<ArrayRef>]) -> Result<&[usize]> {
        let rows = args
            .iter()
            .flatten()
            .chain(keys)
            .next()
            .map_or(0, |a| a.len());
        self.intern(keys, rows)?;
        for (acc, values) in self.accs.iter_mut().zip(args) {
            acc.update_batch(values, &self.scratch, None, self.len)
                .map_err(|e| df("updating an aggregate", e))?;
        }
        Ok(&self.scratch)
    }

    /// Merges partial states of groups given by their keys (one row per group).
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion rejects the states.
    pub fn merge(&mut self, keys: &[ArrayRef], states: &[Vec<ArrayRef>]) -> Result<()> {
        let rows = states
            .first()
            .and_then(|s| s.first())
            .map_or(0, |a| a.len());
        self.intern(keys, rows)?;
        for (acc, state) in self.accs.iter_mut().zip(states) {
            acc.merge_batch(state, &self.scratch, self.len)
                .map_err(|e| df("merging partial states", e))?;
        }
        Ok(())
    }

    /// Adds rows to groups given by index (no key table: the caller numbers the groups, as the
    /// session operator numbers its sessions); `total` is the number of groups after the call.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion rejects the arrays.
    pub fn update_indexed(
        &mut self,
        groups: &[usize],
        total: usize,
        args: &[Vec<ArrayRef>],
    ) -> Result<()> {
        self.len = self.len.max(total);
        for (acc, values) in self.accs.iter_mut().zip(args) {
            acc.update_batch(values, groups, None, self.len)
                .map_err(|e| df("updating an aggregate", e))?;
        }
        Ok(())
    }

    /// Merges partial states (one row per entry of `groups`) into groups given by index.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion rejects the states.
    pub fn merge_indexed(
        &mut self,
        groups: &[usize],
        total: usize,
        states: &[Vec<ArrayRef>],
    ) -> Result<()> {
        self.len = self.len.max(total);
        for (acc, state) in self.accs.iter_mut().zip(states) {
            acc.merge_batch(state, groups, self.len)
                .map_err(|e| df("merging partial states", e))?;
        }
        Ok(())
    }

    /// Takes every group out: the key columns and each aggregate's partial-state columns, one
    /// row per group in group order. The space is empty afterwards.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when DataFusion fails to emit.
    pub fn drain(&mut self) -> Result<(Vec<ArrayRef>, Vec<Vec<ArrayRef>>)> {
        let keys = match &mut self.keys {
            Some(table) if self.len > 0 => table
                .emit(EmitTo::All)
                .map_err(|e| df("emitting group keys", e))?,
            _ => self
                .key_schema
                .fields()
                .iter()
                .map(|f| arrow::array::new_empty_array(f.data_type()))
                .collect(),
        };
        let mut states = Vec::with_capacity(self.accs.len());
        for acc in &mut self.accs {
            states.push(
                acc.state(EmitTo::All)
                    .map_err(|e| df("emitting partial states", e))?,
            );
        }
        self.len = 0;
        Ok((keys, states))
    }

    /// Takes the partial states of the first `n` groups out of a space whose groups are
    /// addressed by index (no key table); the groups after them move down by `n`.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when the space has a key table, or DataFusion fails to emit.
    pub fn drain_first(&mut self, n: usize) -> Result<Vec<Vec<ArrayRef>>> {
        if self.keys.is_some() {
            return Err(Error::Internal(
                "drain_first on a group space with a key table".into(),
            ));
        }
        let n = n.min(self.len);
        let emit = if n == self.len {
            EmitTo::All
        } else {
            EmitTo::First(n)
        };
        let mut states = Vec::with_capacity(self.accs.len());
        for acc in &mut self.accs {
            states.push(
                acc.state(emit)
                    .map_err(|e| df("emitting partial states", e))?,
            );
        }
        self.len -= n;
        Ok(states)
    }

    /// Takes every group out with final values: key columns and one column per aggregate.
    ///
    /// # Errors
    ///
    /// As [`drain`](Self::drain).
    pub fn finish(&mut self) -> Result<(Vec<ArrayRef>, Vec<ArrayRef>)> {
        let (keys, states) = self.drain()?;
        let values = self.set.evaluate_states(&states)?;
        Ok((keys, values))
    }
}
