//! Predicate pushdown from SQL: the conjuncts of a `WHERE` directly over a scanned table that a
//! source can skip input by (`sources[i].prune`): `column op literal` (`=`, `<>`, `<`, `<=`,
//! `>`, `>=`, either way round), `column IS [NOT] NULL`, `column [NOT] BETWEEN a AND b` (not
//! negated), `column IN (literals)` (not negated) and `column = a OR column = b ...` (the form
//! DataFusion gives short `IN` lists; an `IN` condition), on a physical column of the table,
//! with literals of the column's own type. Anything else stays with the filter operator only (which
//! runs on every row anyway).

use arrow::array::AsArray;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::utils::{split_binary, split_conjunction};
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use weir_api::{PruneOp, prunable_type, prune_value};

/// The `prune` conditions (job-spec JSON) of `predicate`'s conjuncts that a source can use.
/// `physical` maps a column of the predicate's input to the table's physical column it is (its
/// name and type), `None` for anything else (computed columns, window bounds).
pub(crate) fn conditions(
    predicate: &Expr,
    physical: impl Fn(&Column) -> Option<(String, DataType)>,
) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for conjunct in split_conjunction(predicate) {
        out.extend(condition(conjunct, &physical));
    }
    out
}

fn condition(
    expr: &Expr,
    physical: &impl Fn(&Column) -> Option<(String, DataType)>,
) -> Vec<serde_json::Value> {
    let column = |e: &Expr| match e {
        Expr::Column(c) => physical(c).filter(|(_, t)| prunable_type(t)),
        _ => None,
    };
    let spec = |name: &str, op: PruneOp, value: Option<serde_json::Value>| {
        let mut c = serde_json::json!({ "column": name, "op": op });
        if let Some(v) = value {
            c["value"] = v;
        }
        c
    };
    match expr {
        Expr::BinaryExpr(BinaryExpr {
            op: Operator::Or, ..
        }) => {
            // Equalities on one column: `IN` that column's values.
            let mut name = None;
            let mut values: Vec<serde_json::Value> = Vec::new();
            for disjunct in split_binary(expr, Operator::Or) {
                let mut one = condition(disjunct, physical);
                let (Some(c), true) = (one.pop(), one.is_empty()) else {
                    return Vec::new();
                };
                let listed = match (c["op"].as_str(), &c["value"]) {
                    (Some("="), v) => vec![v.clone()],
                    (Some("in"), serde_json::Value::Array(list)) => list.clone(),
                    _ => return Vec::new(),
                };
                if name.get_or_insert_with(|| c["column"].clone()) != &c["column"] {
                    return Vec::new();
                }
                for v in listed {
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
            }
            match name.as_ref().and_then(|n| n.as_str()) {
                Some(n) if !values.is_empty() => {
                    vec![spec(n, PruneOp::In, Some(serde_json::Value::Array(values)))]
                }
                _ => Vec::new(),
            }
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let Some(op) = comparison(*op) else {
                return Vec::new();
            };
            let (name, data_type, value, op) = match (column(left), column(right)) {
                (Some((name, t)), None) => (name, t, right.as_ref(), op),
                (None, Some((name, t))) => match op.swapped() {
                    Some(op) => (name, t, left.as_ref(), op),
                    None => return Vec::new(),
                },
                _ => return Vec::new(),
            };
            literal(value, &data_type)
                .map(|v| spec(&name, op, Some(v)))
                .into_iter()
                .collect()
        }
        Expr::IsNull(e) => column(e)
            .map(|(name, _)| spec(&name, PruneOp::IsNull, None))
            .into_iter()
            .collect(),
        Expr::IsNotNull(e) => column(e)
            .map(|(name, _)| spec(&name, PruneOp::IsNotNull, None))
            .into_iter()
            .collect(),
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let Some((name, data_type)) = column(expr) else {
                return Vec::new();
            };
            [(PruneOp::GtEq, low), (PruneOp::LtEq, high)]
                .into_iter()
                .filter_map(|(op, bound)| {
                    literal(bound, &data_type).map(|v| spec(&name, op, Some(v)))
                })
                .collect()
        }
        Expr::InList(list) if !list.negated => {
            let Some((name, data_type)) = column(&list.expr) else {
                return Vec::new();
            };
            let values: Option<Vec<serde_json::Value>> =
                list.list.iter().map(|e| literal(e, &data_type)).collect();
            match values {
                Some(values) if !values.is_empty() => {
                    vec![spec(
                        &name,
                        PruneOp::In,
                        Some(serde_json::Value::Array(values)),
                    )]
                }
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

fn comparison(op: Operator) -> Option<PruneOp> {
    Some(match op {
        Operator::Eq => PruneOp::Eq,
        Operator::NotEq => PruneOp::NotEq,
        Operator::Lt => PruneOp::Lt,
        Operator::LtEq => PruneOp::LtEq,
        Operator::Gt => PruneOp::Gt,
        Operator::GtEq => PruneOp::GtEq,
        _ => return None,
    })
}

/// `expr` as the JSON value of a `prune` condition on a column of `data_type`: a non-null
/// literal of exactly that type whose JSON form reads back as the same value.
fn literal(expr: &Expr, data_type: &DataType) -> Option<serde_json::Value> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    if value.is_null() || &value.data_type() != data_type {
        return None;
    }
    let array = ScalarValue::to_array(value).ok()?;
    let json = if data_type == &DataType::Boolean {
        serde_json::json!(array.as_boolean().value(0))
    } else if data_type.is_signed_integer() {
        serde_json::json!(
            cast(&array, &DataType::Int64)
                .ok()?
                .as_primitive::<Int64Type>()
                .value(0)
        )
    } else if data_type.is_unsigned_integer() {
        serde_json::json!(
            cast(&array, &DataType::UInt64)
                .ok()?
                .as_primitive::<UInt64Type>()
                .value(0)
        )
    } else if data_type.is_floating() {
        let f = cast(&array, &DataType::Float64)
            .ok()?
            .as_primitive::<Float64Type>()
            .value(0);
        serde_json::Value::Number(serde_json::Number::from_f64(f)?)
    } else {
        let text = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())
            .ok()?
            .value(0)
            .to_string();
        serde_json::Value::String(text)
    };
    let back = prune_value(&json, data_type).ok()?;
    (back.as_ref() == array.as_ref()).then_some(json)
}

/// The conditions every one of `scans` has (a source read by several queries may skip only
/// what none of them keeps), in the first scan's order.
pub(crate) fn common(scans: &[Vec<serde_json::Value>]) -> Vec<serde_json::Value> {
    let Some((first, rest)) = scans.split_first() else {
        return Vec::new();
    };
    let mut out: Vec<serde_json::Value> = Vec::new();
    for c in first {
        if rest.iter().all(|scan| scan.contains(c)) && !out.contains(c) {
            out.push(c.clone());
        }
    }
    out
}
