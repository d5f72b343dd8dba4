//! Predicate pushdown: conditions on a source's columns that let it skip input no row of which
//! can satisfy them (`sources[i].prune`, [`crate::PreparedSource::prune`]).
//!
//! A job spec writes each condition as `{ column, op, value }` ([`PruneCondition`]), the value a
//! JSON scalar read as the column's type; [`SourcePredicate::resolve`] checks them against the
//! source's schema and types the values. Pruning is an optimization only: the job still filters
//! the rows after the source, and a source given a predicate may skip input only where no row
//! can satisfy it. It never removes single rows.

use arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, UInt64Array,
};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Schema};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How a [`PruneCondition`] tests its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PruneOp {
    /// `column = value`.
    #[serde(rename = "=")]
    Eq,
    /// `column <> value` (also written `!=`).
    #[serde(rename = "<>", alias = "!=")]
    NotEq,
    /// `column < value`.
    #[serde(rename = "<")]
    Lt,
    /// `column <= value`.
    #[serde(rename = "<=")]
    LtEq,
    /// `column > value`.
    #[serde(rename = ">")]
    Gt,
    /// `column >= value`.
    #[serde(rename = ">=")]
    GtEq,
    /// `column IS NULL` (no value).
    #[serde(rename = "is_null")]
    IsNull,
    /// `column IS NOT NULL` (no value).
    #[serde(rename = "is_not_null")]
    IsNotNull,
    /// `column IN (v1, v2, ...)`: the value is a non-empty list.
    #[serde(rename = "in")]
    In,
}

impl PruneOp {
    /// SQL spelling: `=`, `<>`, `<`, `<=`, `>`, `>=`, `IS NULL`, `IS NOT NULL`, `IN`.
    pub fn sql(self) -> &'static str {
        match self {
            PruneOp::Eq => "=",
            PruneOp::NotEq => "<>",
            PruneOp::Lt => "<",
            PruneOp::LtEq => "<=",
            PruneOp::Gt => ">",
            PruneOp::GtEq => ">=",
            PruneOp::IsNull => "IS NULL",
            PruneOp::IsNotNull => "IS NOT NULL",
            PruneOp::In => "IN",
        }
    }

    /// The same comparison with its operands swapped (`5 < x` is `x > 5`); `None` for the
    /// operators that are not comparisons of two operands.
    pub fn swapped(self) -> Option<PruneOp> {
        Some(match self {
            PruneOp::Eq => PruneOp::Eq,
            PruneOp::NotEq => PruneOp::NotEq,
            PruneOp::Lt => PruneOp::Gt,
            PruneOp::LtEq => PruneOp::GtEq,
            PruneOp::Gt => PruneOp::Lt,
            PruneOp::GtEq => PruneOp::LtEq,
            PruneOp::IsNull | PruneOp::IsNotNull | PruneOp::In => return None,
        })
    }
}

/// One condition of a source's `prune` list as a job spec writes it:
/// `{ column: price, op: ">", value: 90000 }`.
///
/// `value` is a JSON scalar read as the column's type: a boolean for `boolean`, a whole number
/// for integer columns, a number for floating-point ones, a string for text, and a string in
/// Arrow's text form for dates, times, timestamps (`"2026-01-01T00:00:00"`, with an offset
/// when the column has a time zone) and decimals (`"12.50"`, or a whole number). `in` takes a
/// non-empty list of such values; `is_null` and `is_not_null` take none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneCondition {
    /// A column of the connector's (declared or inferred) schema.
    pub column: String,
    /// The test.
    pub op: PruneOp,
    /// The literal (a list for `in`; absent for `is_null` and `is_not_null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
}

impl PruneCondition {
    /// What can be checked without the source's schema: a column named, and a value of the
    /// shape the operator takes.
    ///
    /// # Errors
    /// The field at fault (`column`, `value`, `value[k]`, or empty for the whole condition)
    /// and why.
    pub fn check(&self) -> std::result::Result<(), (String, String)> {
        if self.column.trim().is_empty() {
            return Err(("column".into(), "must name a column of the source".into()));
        }
        let scalar = |v: &serde_json::Value, field: String| match v {
            serde_json::Value::Bool(_)
            | serde_json::Value::Number(_)
            | serde_json::Value::String(_) => Ok(()),
            serde_json::Value::Null => Err((
                field,
                "must not be null (`column = NULL` holds for no row; use `op: is_null`)".into(),
            )),
            other => Err((
                field,
                format!("must be a boolean, a number or a string, not `{other}`"),
            )),
        };
        match (self.op, &self.value) {
            (PruneOp::IsNull | PruneOp::IsNotNull, None) => Ok(()),
            (PruneOp::IsNull | PruneOp::IsNotNull, Some(_)) => Err((
                "value".into(),
                format!("`{}` takes no value", self.op.sql()),
            )),
            (_, None) => Err(("value".into(), format!("`{}` needs a value", self.op.sql()))),
            (PruneOp::In, Some(serde_json::Value::Array(values))) => {
                if values.is_empty() {
                    return Err(("value".into(), "`in` needs at least one value".into()));
                }
                for (k, v) in values.iter().enumerate() {
                    scalar(v, format!("value[{k}]"))?;
                }
                Ok(())
            }
            (PruneOp::In, Some(_)) => Err(("value".into(), "`in` takes a list of values".into())),
            (_, Some(v)) => scalar(v, "value".into()),
        }
    }
}

/// One resolved condition of a [`SourcePredicate`]: `column op values`, the values typed as
/// the column.
#[derive(Debug, Clone)]
pub struct ColumnPredicate {
    /// The column's name in the source's schema.
    pub column: String,
    /// The test.
    pub op: PruneOp,
    /// The literal(s), of the column's type and without nulls: one for a comparison, the list
    /// of `in`, none for `is_null` and `is_not_null`.
    pub values: ArrayRef,
}

/// A conjunction of conditions on a source's columns, each `column op literal` with the literal
/// typed as the column: what [`crate::PreparedSource::prune`] is given. A row satisfies it when
/// it satisfies every condition, under SQL's rules (a comparison with a null is not satisfied).
#[derive(Debug, Clone)]
pub struct SourcePredicate {
    conditions: Vec<ColumnPredicate>,
}

impl SourcePredicate {
    /// The predicate of `conditions` (each checked with [`PruneCondition::check`]) over the
    /// columns of `schema`.
    ///
    /// # Errors
    /// The path below the list (`[j].column`, `[j].value`, `[j].value[k]`) and why: a column
    /// that is not in `schema`, one whose type cannot be compared ([`prunable_type`]), a value
    /// that is not of the column's type.
    pub fn resolve(
        conditions: &[PruneCondition],
        schema: &Schema,
    ) -> std::result::Result<Self, (String, String)> {
        let mut out = Vec::with_capacity(conditions.len());
        for (j, c) in conditions.iter().enumerate() {
            c.check().map_err(|(field, m)| (at(j, &field), m))?;
            let Ok(field) = schema.field_with_name(&c.column) else {
                let known: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Err((
                    at(j, "column"),
                    format!(
                        "`{}` is not a column of the source (columns: {})",
                        c.column,
                        known.join(", ")
                    ),
                ));
            };
            let data_type = field.data_type();
            if !prunable_type(data_type) {
                return Err((
                    at(j, "column"),
                    format!(
                        "`{}` has type {data_type}, which `prune` does not compare (it compares \
                         booleans, numbers, text, dates, times, timestamps and decimals)",
                        c.column
                    ),
                ));
            }
            let values = match (&c.value, c.op) {
                (None, _) => arrow::array::new_empty_array(data_type),
                (Some(serde_json::Value::Array(list)), PruneOp::In) => {
                    let mut arrays = Vec::with_capacity(list.len());
                    for (k, v) in list.iter().enumerate() {
                        arrays.push(
                            prune_value(v, data_type)
                                .map_err(|m| (at(j, &format!("value[{k}]")), m))?,
                        );
                    }
                    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
                    arrow::compute::concat(&refs)
                        .map_err(|e| (at(j, "value"), format!("joining the values: {e}")))?
                }
                (Some(v), _) => prune_value(v, data_type).map_err(|m| (at(j, "value"), m))?,
            };
            out.push(ColumnPredicate {
                column: c.column.clone(),
                op: c.op,
                values,
            });
        }
        Ok(SourcePredicate { conditions: out })
    }

    /// The conditions, all of which a row must satisfy.
    pub fn conditions(&self) -> &[ColumnPredicate] {
        &self.conditions
    }
}

fn at(j: usize, field: &str) -> String {
    if field.is_empty() {
        format!("[{j}]")
    } else {
        format!("[{j}].{field}")
    }
}

impl std::fmt::Display for SourcePredicate {
    /// SQL-like text: `price > 90000 AND name IN ('a', 'b') AND note IS NULL`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, c) in self.conditions.iter().enumerate() {
            if i > 0 {
                f.write_str(" AND ")?;
            }
            write!(f, "{} {}", c.column, c.op.sql())?;
            if c.values.is_empty() {
                continue;
            }
            let quoted = matches!(
                c.values.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) || !(c.values.data_type().is_numeric()
                || c.values.data_type() == &DataType::Boolean);
            let text: Vec<String> =
                match ArrayFormatter::try_new(c.values.as_ref(), &FormatOptions::default()) {
                    Ok(fmt) => (0..c.values.len())
                        .map(|i| {
                            let v = fmt.value(i).to_string();
                            if quoted {
                                format!("'{}'", v.replace('\'', "''"))
                            } else {
                                v
                            }
                        })
                        .collect(),
                    Err(_) => vec!["?".into()],
                };
            if c.op == PruneOp::In {
                write!(f, " ({})", text.join(", "))?;
            } else {
                write!(f, " {}", text.join(", "))?;
            }
        }
        Ok(())
    }
}

/// Whether `prune` compares columns of `data_type`: booleans, integers, floating point, text
/// (`Utf8`, `LargeUtf8`, `Utf8View`), dates, times, timestamps and decimals.
pub fn prunable_type(data_type: &DataType) -> bool {
    crate::supports(data_type, crate::ColumnUse::Prune)
}

/// The JSON scalar `value` read as one value of `data_type` (see [`PruneCondition`] for what
/// each type takes), as an array of length 1.
///
/// # Errors
/// Why the value is not one of the type.
pub fn prune_value(
    value: &serde_json::Value,
    data_type: &DataType,
) -> std::result::Result<ArrayRef, String> {
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let wrong = |expected: &str| format!("a {data_type} column takes {expected}, not `{value}`");
    let cast = |array: ArrayRef| {
        cast_with_options(&array, data_type, &strict)
            .map_err(|e| format!("`{value}` is not a valid {data_type}: {e}"))
    };
    let whole = |n: &serde_json::Number| -> Option<ArrayRef> {
        if let Some(i) = n.as_i64() {
            Some(Arc::new(Int64Array::from(vec![i])))
        } else {
            n.as_u64()
                .map(|u| Arc::new(UInt64Array::from(vec![u])) as ArrayRef)
        }
    };
    let array = match (data_type, value) {
        (DataType::Boolean, serde_json::Value::Bool(b)) => {
            Arc::new(BooleanArray::from(vec![*b])) as ArrayRef
        }
        (DataType::Boolean, _) => return Err(wrong("`true` or `false`")),
        (t, serde_json::Value::Number(n)) if t.is_integer() => match whole(n) {
            Some(a) => cast(a)?,
            None => return Err(wrong("a whole number")),
        },
        (t, _) if t.is_integer() => return Err(wrong("a whole number")),
        (t, serde_json::Value::Number(n)) if t.is_floating() => match n.as_f64() {
            Some(f) => cast(Arc::new(Float64Array::from(vec![f])))?,
            None => return Err(wrong("a number")),
        },
        (t, _) if t.is_floating() => return Err(wrong("a number")),
        (
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View,
            serde_json::Value::String(s),
        ) => cast(Arc::new(StringArray::from(vec![s.as_str()])))?,
        (DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View, _) => {
            return Err(wrong("a string"));
        }
        (
            DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..),
            serde_json::Value::Number(n),
        ) => match whole(n) {
            Some(a) => cast(a)?,
            None => return Err(wrong("a string such as \"12.50\" or a whole number")),
        },
        (t, serde_json::Value::String(s)) if prunable_type(t) => {
            cast(Arc::new(StringArray::from(vec![s.as_str()])))?
        }
        (t, _) if prunable_type(t) => return Err(wrong("a string in Arrow's text form")),
        _ => return Err(format!("`prune` does not compare {data_type} columns")),
    };
    if array.null_count() > 0 {
        return Err(format!("`{value}` is not a valid {data_type}"));
    }
    Ok(array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, TimeUnit};
    use serde_json::json;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("small", DataType::Int8, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("x", DataType::Float32, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
                true,
            ),
            Field::new("d", DataType::Decimal128(10, 2), true),
            Field::new("flag", DataType::Boolean, true),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                true,
            ),
        ])
    }

    fn conditions(value: serde_json::Value) -> Vec<PruneCondition> {
        serde_json::from_value(value).expect("conditions parse")
    }

    #[test]
    fn conditions_resolve_to_typed_literals() {
        let c = conditions(json!([
            { "column": "id", "op": ">", "value": 90000 },
            { "column": "name", "op": "in", "value": ["a", "it's"] },
            { "column": "x", "op": "<=", "value": 1.5 },
            { "column": "ts", "op": ">=", "value": "2026-01-01T00:00:00Z" },
            { "column": "d", "op": "!=", "value": "12.50" },
            { "column": "flag", "op": "is_null" },
        ]));
        let p = SourcePredicate::resolve(&c, &schema()).expect("resolves");
        assert_eq!(p.conditions().len(), 6);
        assert_eq!(
            p.conditions()[3].values.data_type(),
            schema().field(4).data_type()
        );
        assert_eq!(
            p.to_string(),
            "id > 90000 AND name IN ('a', 'it''s') AND x <= 1.5 AND \
             ts >= '2026-01-01T00:00:00Z' AND d <> 12.50 AND flag IS NULL"
        );
        // The spec form round-trips.
        let text = serde_json::to_value(&c).expect("serializes");
        assert_eq!(text[4]["op"], "<>");
        assert!(text[5].get("value").is_none());
    }

    #[test]
    fn errors_name_the_field_at_fault() {
        let err = |value: serde_json::Value| {
            SourcePredicate::resolve(&conditions(value), &schema()).expect_err("refused")
        };
        let (path, message) = err(json!([
            { "column": "id", "op": "=", "value": 1 },
            { "column": "price", "op": "=", "value": 1 },
        ]));
        assert_eq!(path, "[1].column");
        assert!(message.contains("columns: id, small"), "{message}");
        let (path, message) = err(json!([{ "column": "id", "op": ">", "value": "many" }]));
        assert_eq!(path, "[0].value");
        assert!(message.contains("whole number"), "{message}");
        let (path, message) = err(json!([{ "column": "small", "op": ">", "value": 300 }]));
        assert_eq!(path, "[0].value");
        assert!(message.contains("not a valid Int8"), "{message}");
        let (path, _) = err(json!([{ "column": "id", "op": "in", "value": [1, 2.5] }]));
        assert_eq!(path, "[0].value[1]");
        let (path, message) = err(json!([{ "column": "ts", "op": "<", "value": "soon" }]));
        assert_eq!(path, "[0].value");
        assert!(message.contains("soon"), "{message}");
        let (path, message) = err(json!([{ "column": "tags", "op": "is_null" }]));
        assert_eq!(path, "[0].column");
        assert!(message.contains("does not compare"), "{message}");
        let (path, _) = err(json!([{ "column": "id", "op": "is_null", "value": 1 }]));
        assert_eq!(path, "[0].value");
        let (path, message) = err(json!([{ "column": "id", "op": "=" }]));
        assert_eq!(
            (path.as_str(), message.as_str()),
            ("[0].value", "`=` needs a value")
        );
        // `value: null` is no value.
        let (path, message) = err(json!([{ "column": "id", "op": "=", "value": null }]));
        assert_eq!(
            (path.as_str(), message.as_str()),
            ("[0].value", "`=` needs a value")
        );
        let (path, message) = err(json!([{ "column": "id", "op": "in", "value": [1, null] }]));
        assert_eq!(path, "[0].value[1]");
        assert!(message.contains("is_null"), "{message}");
        let (path, _) = err(json!([{ "column": "id", "op": "in", "value": [] }]));
        assert_eq!(path, "[0].value");
        let (path, _) = err(json!([{ "column": " ", "op": "is_null" }]));
        assert_eq!(path, "[0].column");
        let bad: std::result::Result<Vec<PruneCondition>, _> =
            serde_json::from_value(json!([{ "column": "id", "op": "like", "value": "a%" }]));
        assert!(bad.is_err());
    }
}
