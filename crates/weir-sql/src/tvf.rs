//! Flink's window table-valued functions: `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))`,
//! `HOP(.., slide, size)`, `CUMULATE(.., step, max_size)` and
//! `SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap)`.
//!
//! DataFusion has no `TABLE t` or `DESCRIPTOR(col)` arguments, so a window TVF is rewritten at
//! the token level into a call of a registered table function, `__weir_tumble('t', 'ts', '',
//! size)`, whose table (a [`WindowTvfTable`]) has the input's columns plus `window_start`,
//! `window_end` and `window_time`. The translator recognizes a scan of that table under a
//! `GROUP BY window_start, window_end, ...` and turns the pair into one `window` operator.

use crate::ddl::interval_text_ms;
use crate::error::{Here, Result};
use crate::script::{is_trivia, position};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableFunctionImpl, TableProvider};
use datafusion::common::{DataFusionError, ScalarValue, plan_err};
use datafusion::datasource::TableType;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The window TVFs, by their SQL name.
pub(crate) const KINDS: [&str; 4] = ["TUMBLE", "HOP", "CUMULATE", "SESSION"];

/// The registered table function behind a window TVF kind.
pub(crate) fn function_name(kind: &str) -> String {
    format!("__weir_{}", kind.to_ascii_lowercase())
}

/// What a window TVF's `TABLE` argument can name.
#[derive(Debug)]
pub(crate) enum TvfInput {
    /// A table declared with `CREATE TABLE`: its schema.
    Table(SchemaRef),
    /// A view: its columns, and its optimized plan (or why DataFusion could not optimize it).
    View {
        schema: SchemaRef,
        plan: std::result::Result<Arc<LogicalPlan>, String>,
    },
}

/// The declared tables and views by name, shared with the table functions.
pub(crate) type Schemas = Arc<RwLock<HashMap<String, TvfInput>>>;

/// A table that only has a schema: declared tables are read by the streaming runtime, never
/// by DataFusion.
#[derive(Debug)]
pub(crate) struct StreamTable {
    pub(crate) schema: SchemaRef,
}

#[async_trait]
impl TableProvider for StreamTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        plan_err!("Weir tables are streams read by the Weir runtime, not by DataFusion")
    }
}

/// The table of a window TVF call: the input's rows with their window columns.
#[derive(Debug, Clone)]
pub(crate) struct WindowTvfTable {
    /// The input table or view.
    pub(crate) table: String,
    /// The view's optimized plan, when the input is a view.
    pub(crate) view: Option<Arc<LogicalPlan>>,
    /// The event-time column (`DESCRIPTOR`).
    pub(crate) time_column: String,
    /// `PARTITION BY` columns (sessions).
    pub(crate) partition_by: Vec<String>,
    /// The `window` option of the Weir window operator, e.g. `{type: tumble, size: 10000}`.
    pub(crate) window: serde_json::Value,
    pub(crate) schema: SchemaRef,
}

#[async_trait]
impl TableProvider for WindowTvfTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> datafusion::common::Result<Arc<dyn ExecutionPlan>> {
        plan_err!("window table functions run as Weir window operators, not in DataFusion")
    }
}

/// The table function `__weir_<kind>(table, column, partition_by, sizes...)`.
#[derive(Debug)]
pub(crate) struct WindowTvf {
    pub(crate) kind: &'static str,
    pub(crate) schemas: Schemas,
}

fn literal_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => Some(s.clone()),
        _ => None,
    }
}

/// Milliseconds of an interval argument (`INTERVAL '10' SECOND` or a string like `'10 s'`).
fn interval_ms(expr: &Expr) -> Option<i64> {
    let ms = match expr {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) if v.months == 0 => {
            let nanos = i128::from(v.days) * 86_400_000_000_000 + i128::from(v.nanoseconds);
            (nanos % 1_000_000 == 0).then_some(nanos / 1_000_000)?
        }
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            i128::from(v.days) * 86_400_000 + i128::from(v.milliseconds)
        }
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => i128::from(interval_text_ms(s, None)?),
        Expr::Literal(ScalarValue::Int64(Some(v)), _) => i128::from(*v),
        _ => return None,
    };
    i64::try_from(ms).ok().filter(|ms| *ms > 0)
}

impl TableFunctionImpl for WindowTvf {
    fn call(&self, args: &[Expr]) -> datafusion::common::Result<Arc<dyn TableProvider>> {
        let kind = self.kind;
        let text = |i: usize| {
            args.get(i).and_then(literal_text).ok_or_else(|| {
                DataFusionError::Plan(format!("{kind}: malformed call (argument {i})"))
            })
        };
        let (table, time_column, partition) = (text(0)?, text(1)?, text(2)?);
        let sizes: Vec<i64> = args[3..]
            .iter()
            .map(|a| {
                interval_ms(a).ok_or_else(|| {
                    DataFusionError::Plan(format!(
                        "{kind}: `{a}` is not a positive interval of whole milliseconds, e.g. \
                         INTERVAL '10' SECOND"
                    ))
                })
            })
            .collect::<datafusion::common::Result<_>>()?;
        let window = match (kind, sizes.as_slice()) {
            ("TUMBLE", [size]) => serde_json::json!({"type": "tumble", "size": size}),
            ("HOP", [slide, size]) => {
                serde_json::json!({"type": "hop", "size": size, "slide": slide})
            }
            ("CUMULATE", [step, max_size]) => {
                serde_json::json!({"type": "cumulate", "step": step, "max_size": max_size})
            }
            ("SESSION", [gap]) => serde_json::json!({"type": "session", "gap": gap}),
            _ => {
                let expected = match kind {
                    "HOP" => "HOP(TABLE t, DESCRIPTOR(ts), slide, size)",
                    "CUMULATE" => "CUMULATE(TABLE t, DESCRIPTOR(ts), step, max_size)",
                    "SESSION" => "SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap)",
                    _ => "TUMBLE(TABLE t, DESCRIPTOR(ts), size)",
                };
                return plan_err!("{kind} takes {expected}");
            }
        };
        let schemas = self
            .schemas
            .read()
            .map_err(|_| DataFusionError::Internal("table catalog lock poisoned".into()))?;
        let (input, view) = match schemas.get(&table) {
            Some(TvfInput::Table(schema)) => (schema, None),
            Some(TvfInput::View { schema, plan }) => match plan {
                Ok(plan) => (schema, Some(Arc::clone(plan))),
                Err(e) => return plan_err!("{kind}: view `{table}`: {e}"),
            },
            None => {
                return plan_err!(
                    "{kind}: no table or view `{table}`; declare it with CREATE TABLE or \
                     CREATE VIEW"
                );
            }
        };
        let Ok(time_field) = input.field_with_name(&time_column) else {
            return plan_err!("{kind}: DESCRIPTOR({time_column}): no such column in `{table}`");
        };
        let tz = match time_field.data_type() {
            DataType::Timestamp(_, tz) => tz.clone(),
            DataType::Int64 => None,
            other => {
                return plan_err!(
                    "{kind}: DESCRIPTOR({time_column}) has type {other}; a time attribute is a \
                     TIMESTAMP (or BIGINT milliseconds)"
                );
            }
        };
        let partition_by: Vec<String> = partition
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let window_columns = ["window_start", "window_end", "window_time"];
        if let Some(taken) = window_columns
            .iter()
            .find(|c| input.field_with_name(c).is_ok())
        {
            return plan_err!(
                "{kind}: `{table}` has a column `{taken}`, which the window adds: rename it in \
                 the view (`{taken} AS ...`)"
            );
        }
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        let ts = DataType::Timestamp(TimeUnit::Millisecond, tz);
        for name in window_columns {
            fields.push(Field::new(name, ts.clone(), false));
        }
        Ok(Arc::new(WindowTvfTable {
            table,
            view,
            time_column,
            partition_by,
            window,
            schema: Arc::new(Schema::new(fields)),
        }))
    }
}

fn word(value: &str) -> Token {
    Token::make_word(value, None)
}

fn ident_text(token: &Token) -> Option<String> {
    match token {
        Token::Word(Word {
            value, quote_style, ..
        }) => Some(if quote_style.is_some() {
            value.clone()
        } else {
            value.to_lowercase()
        }),
        _ => None,
    }
}

fn is_word(token: &Token, text: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text))
}

/// Rewrites every window TVF call among `tokens` into a call of its table function.
///
/// # Errors
///
/// A syntax error at the call when its shape is not Flink's.
pub(crate) fn rewrite(tokens: &[TokenWithSpan], here: &Here) -> Result<Vec<TokenWithSpan>> {
    // Indices of significant tokens, so patterns skip whitespace and comments.
    let sig: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect();
    let tok = |k: usize| sig.get(k).map(|&i| &tokens[i].token);
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut copied_to = 0; // tokens[..copied_to] are in `out` or replaced
    let mut k = 0;
    while k < sig.len() {
        // `TABLE ( KIND (` or `KIND ( TABLE`
        let (wrapped, kind_at) = match (tok(k), tok(k + 1), tok(k + 2), tok(k + 3)) {
            (Some(t), Some(Token::LParen), Some(kind), Some(Token::LParen))
                if is_word(t, "TABLE") && KINDS.iter().any(|n| is_word(kind, n)) =>
            {
                (true, k + 2)
            }
            (Some(kind), Some(Token::LParen), Some(t), _)
                if is_word(t, "TABLE") && KINDS.iter().any(|n| is_word(kind, n)) =>
            {
                (false, k)
            }
            _ => {
                k += 1;
                continue;
            }
        };
        let at = here.at(position(&tokens[sig[kind_at]]));
        let kind = KINDS
            .iter()
            .find(|n| tok(kind_at).is_some_and(|t| is_word(t, n)))
            .copied()
            .unwrap_or("TUMBLE");
        let shape = || {
            at.syntax(format!(
                "expected {kind}(TABLE t{}, DESCRIPTOR(time_column), ...)",
                if kind == "SESSION" {
                    " PARTITION BY key"
                } else {
                    ""
                }
            ))
        };
        let mut j = kind_at + 2; // after `KIND (`
        if !tok(j).is_some_and(|t| is_word(t, "TABLE")) {
            return Err(shape());
        }
        let table = tok(j + 1).and_then(ident_text).ok_or_else(shape)?;
        j += 2;
        let mut partition = Vec::new();
        if tok(j).is_some_and(|t| is_word(t, "PARTITION"))
            && tok(j + 1).is_some_and(|t| is_word(t, "BY"))
        {
            j += 2;
            loop {
                partition.push(tok(j).and_then(ident_text).ok_or_else(shape)?);
                j += 1;
                if tok(j) == Some(&Token::Comma)
                    && !tok(j + 1).is_some_and(|t| is_word(t, "DESCRIPTOR"))
                {
                    j += 1;
                } else {
                    break;
                }
            }
        }
        if tok(j) != Some(&Token::Comma)
            || !tok(j + 1).is_some_and(|t| is_word(t, "DESCRIPTOR"))
            || tok(j + 2) != Some(&Token::LParen)
        {
            return Err(shape());
        }
        let column = tok(j + 3).and_then(ident_text).ok_or_else(shape)?;
        if tok(j + 4) != Some(&Token::RParen) {
            return Err(shape());
        }
        j += 5;
        // The remaining arguments up to the call's closing parenthesis, kept as tokens.
        let args_from = j;
        let mut depth = 0usize;
        while let Some(t) = tok(j) {
            match t {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => break,
                Token::RParen => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        if tok(j) != Some(&Token::RParen) {
            return Err(shape());
        }
        let close = j;
        let end = if wrapped {
            if tok(close + 1) != Some(&Token::RParen) {
                return Err(shape());
            }
            close + 1
        } else {
            close
        };
        // Emit: tokens before the call, then the function call.
        let start_index = sig[k];
        out.extend(tokens[copied_to..start_index].iter().cloned());
        let span = tokens[start_index].span;
        let mut push = |token: Token| out.push(TokenWithSpan { token, span });
        push(word(&function_name(kind)));
        push(Token::LParen);
        push(Token::SingleQuotedString(table));
        push(Token::Comma);
        push(Token::SingleQuotedString(column));
        push(Token::Comma);
        push(Token::SingleQuotedString(partition.join(",")));
        if args_from < close {
            // The arguments start with their separating comma.
            out.extend(tokens[sig[args_from]..sig[close]].iter().cloned());
        }
        out.push(TokenWithSpan {
            token: Token::RParen,
            span: tokens[sig[close]].span,
        });
        copied_to = sig[end] + 1;
        k = end + 1;
    }
    out.extend(tokens[copied_to..].iter().cloned());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::split;

    fn rewritten(sql: &str) -> String {
        let s = &split(sql, "t.sql").unwrap()[0];
        rewrite(&s.tokens, &s.here)
            .unwrap()
            .iter()
            .map(|t| t.token.to_string())
            .collect()
    }

    #[test]
    fn rewrites_each_kind() {
        assert_eq!(
            rewritten(
                "SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
            ),
            "SELECT * FROM __weir_tumble('bids','ts','', INTERVAL '10' SECOND)"
        );
        assert_eq!(
            rewritten(
                "SELECT * FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) x"
            ),
            "SELECT * FROM __weir_hop('bids','ts','', INTERVAL '2' SECOND, INTERVAL '10' SECOND) x"
        );
        assert_eq!(
            rewritten(
                "SELECT 1 FROM SESSION(TABLE b PARTITION BY k, j, DESCRIPTOR(ts), INTERVAL '5' MINUTE)"
            ),
            "SELECT 1 FROM __weir_session('b','ts','k,j', INTERVAL '5' MINUTE)"
        );
    }

    #[test]
    fn malformed_calls_name_the_position() {
        let s = &split(
            "SELECT *\nFROM TABLE(TUMBLE(TABLE bids, ts, INTERVAL '1' SECOND))",
            "t.sql",
        )
        .unwrap()[0];
        let err = rewrite(&s.tokens, &s.here).unwrap_err().to_string();
        assert!(
            err.starts_with("t.sql:2:12:") && err.contains("DESCRIPTOR"),
            "{err}"
        );
    }
}
