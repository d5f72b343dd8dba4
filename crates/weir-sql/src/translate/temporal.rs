//! Event-time temporal joins: `JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON ...`, each row of a
//! stream with the version of a versioned table current at the row's time, into a
//! `temporal_join` operator. DataFusion's dialect does not parse `FOR SYSTEM_TIME AS OF` (and
//! its planner would ignore it), so the clauses are taken out of the statement's tokens first
//! ([`take_temporal_refs`]) and the join whose right side is such a table becomes temporal.

use super::join::{physical, unique};
use super::{Changes, Stream, Translator, unalias};
use crate::error::Here;
use crate::error::Result;
use crate::script::{is_trivia, position};
use datafusion::logical_expr::{Expr, Join, JoinType, LogicalPlan};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// A table read `FOR SYSTEM_TIME AS OF` a column in a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemporalRef {
    /// The name the query knows the table by: its alias, or its name.
    pub(crate) name: String,
    /// The column of the `AS OF` (the stream's time attribute), without its qualifier.
    pub(crate) time: String,
}

/// The function the rewritten `ON` condition calls with the `AS OF` column, so that DataFusion
/// keeps the column and the translator finds the clause on its join.
pub(crate) const AS_OF: &str = "__weir_as_of";

/// [`AS_OF`]`(stream time, a table column)`: true for every row. It reads both sides, so that no
/// optimizer rule moves it off its join.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct AsOfMarker {
    signature: datafusion::logical_expr::Signature,
}

impl AsOfMarker {
    /// The marker as a scalar function to register with the planning session.
    pub(crate) fn udf() -> datafusion::logical_expr::ScalarUDF {
        datafusion::logical_expr::ScalarUDF::new_from_impl(Self {
            signature: datafusion::logical_expr::Signature::any(
                2,
                datafusion::logical_expr::Volatility::Volatile,
            ),
        })
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for AsOfMarker {
    fn name(&self) -> &str {
        AS_OF
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(
        &self,
        _args: &[arrow::datatypes::DataType],
    ) -> datafusion::common::Result<arrow::datatypes::DataType> {
        Ok(arrow::datatypes::DataType::Boolean)
    }

    fn invoke_with_args(
        &self,
        _args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> datafusion::common::Result<datafusion::logical_expr::ColumnarValue> {
        Ok(datafusion::logical_expr::ColumnarValue::Scalar(
            datafusion::common::ScalarValue::Boolean(Some(true)),
        ))
    }
}

/// Whether `predicate` is nothing but [`AS_OF`] markers (which DataFusion's predicate inference
/// may copy from a temporal join onto one of its sides): such a filter keeps every row.
pub(crate) fn only_as_of(predicate: &Expr) -> bool {
    datafusion::logical_expr::utils::split_conjunction(predicate)
        .iter()
        .all(|c| matches!(c, Expr::ScalarFunction(f) if f.name() == AS_OF))
}

/// Rewrites every `JOIN t FOR SYSTEM_TIME AS OF o.ts [AS] r ON cond` of a statement's tokens
/// into `JOIN t [AS] r ON (cond) AND __weir_as_of(o.ts, r.k)` (`r.k` the first column of `r`
/// the condition names; DataFusion's SQL dialect does not
/// parse the clause, and its planner would drop a column nothing else reads), and says which
/// tables were read so: each one's alias, or its name.
///
/// # Errors
/// An `AS OF` of anything but a (qualified) column, or a clause without `ON`, at its position.
pub(crate) fn take_temporal_refs(
    tokens: &mut Vec<TokenWithSpan>,
    here: &Here,
) -> Result<Vec<TemporalRef>> {
    let mut refs = Vec::new();
    loop {
        let sig: Vec<usize> = (0..tokens.len())
            .filter(|&i| !is_trivia(&tokens[i].token))
            .collect();
        let word = |k: usize, w: &str| {
            sig.get(k).is_some_and(|&i| {
                matches!(&tokens[i].token, Token::Word(x)
                    if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
            })
        };
        let Some(k) = (1..sig.len()).find(|&k| {
            word(k, "FOR") && word(k + 1, "SYSTEM_TIME") && word(k + 2, "AS") && word(k + 3, "OF")
        }) else {
            return Ok(refs);
        };
        let clause = here.at(position(&tokens[sig[k]]));
        let ident = |k: usize| {
            sig.get(k).and_then(|&i| match &tokens[i].token {
                Token::Word(w) => Some(crate::ddl::normalize(&w.to_ident(tokens[i].span))),
                _ => None,
            })
        };
        let table = ident(k - 1)
            .ok_or_else(|| clause.invalid("FOR SYSTEM_TIME AS OF follows a table's name"))?;
        // The column: identifiers separated by dots.
        let mut end = k + 4;
        while ident(end).is_some()
            && sig
                .get(end + 1)
                .is_some_and(|&i| tokens[i].token == Token::Period)
        {
            end += 2;
        }
        let Some(column) = ident(end) else {
            return Err(clause.invalid(
                "FOR SYSTEM_TIME AS OF takes the stream's time attribute, a column (o.ts)",
            ));
        };
        end += 1;
        let column_tokens: Vec<TokenWithSpan> = tokens[sig[k + 4]..sig[end - 1] + 1].to_vec();
        // The alias: `AS name`, or a name that is no keyword.
        let (alias, after) = if word(end, "AS") {
            (ident(end + 1), end + 2)
        } else {
            match sig.get(end).map(|&i| &tokens[i].token) {
                Some(Token::Word(w))
                    if w.quote_style.is_some() || w.keyword == Keyword::NoKeyword =>
                {
                    (ident(end), end + 1)
                }
                _ => (None, end),
            }
        };
        if !word(after, "ON") {
            return Err(clause.invalid(
                "a temporal join joins ON the versioned table's primary key: JOIN t FOR \
                 SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k",
            ));
        }
        // The end of the ON condition: the first clause keyword, `)` or `;` outside brackets.
        let mut depth = 0_i32;
        let mut stop = after + 1;
        while let Some(&i) = sig.get(stop) {
            match &tokens[i].token {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => break,
                Token::RParen => depth -= 1,
                Token::SemiColon if depth == 0 => break,
                Token::Word(w)
                    if depth == 0
                        && w.quote_style.is_none()
                        && [
                            "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "WHERE", "GROUP",
                            "HAVING", "ORDER", "LIMIT", "UNION", "WINDOW", "QUALIFY",
                        ]
                        .iter()
                        .any(|k| w.value.eq_ignore_ascii_case(k)) =>
                {
                    break;
                }
                _ => {}
            }
            stop += 1;
        }
        // A column of the table the condition names, for the marker's second argument.
        let name = alias.clone().unwrap_or_else(|| table.clone());
        let table_column = (after + 1..stop.saturating_sub(2)).find(|&j| {
            ident(j).as_deref() == Some(name.as_str())
                && tokens[sig[j + 1]].token == Token::Period
                && ident(j + 2).is_some()
        });
        let Some(table_column) = table_column else {
            return Err(clause.invalid(format!(
                "a temporal join joins ON the versioned table's primary key: ... ON o.k = {name}.k"
            )));
        };
        let table_column: Vec<TokenWithSpan> =
            tokens[sig[table_column]..sig[table_column + 2] + 1].to_vec();
        let span = tokens[sig[k]].span;
        let at = |token: Token| TokenWithSpan { token, span };
        let mut tail = vec![
            at(Token::RParen),
            at(Token::Whitespace(
                datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
            )),
            at(Token::make_keyword("AND")),
            at(Token::Whitespace(
                datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
            )),
            at(Token::make_word(AS_OF, None)),
            at(Token::LParen),
        ];
        tail.extend(column_tokens);
        tail.push(at(Token::Comma));
        tail.extend(table_column);
        tail.extend([
            at(Token::RParen),
            at(Token::Whitespace(
                datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
            )),
        ]);
        // Edits from the back, so the earlier indices stay right.
        let insert_at = sig.get(stop).copied().unwrap_or(tokens.len());
        tokens.splice(insert_at..insert_at, tail);
        let on = sig[after];
        tokens.insert(on + 1, at(Token::LParen));
        tokens.drain(sig[k]..sig[end - 1] + 1);
        refs.push(TemporalRef {
            name: alias.unwrap_or(table),
            time: column,
        });
    }
}

impl Translator<'_> {
    /// Makes the versioned view under `node` (through projections and filters) pass every row
    /// of its input on as a version (`+U`, row number 1), instead of the last row of each key
    /// per batch: each row of a versioned view starts a version of its key at its time, and
    /// the temporal join keeps a key's versions by time, so an out-of-order row is a version
    /// too. Being its input's rows in order, the projection passes their split watermarks on,
    /// so the join judges a late version by its split as it judges a late probe row.
    fn versions_of_view(&mut self, node: &str) {
        let mut at = node.to_owned();
        loop {
            if let Some(i) = self.versioned_views.iter().position(|(n, _)| *n == at) {
                let (view, columns) = self.versioned_views.remove(i);
                let mut expressions: Vec<String> =
                    columns.iter().map(|c| super::quote(c)).collect();
                if self.numbered.contains(&view) {
                    expressions.push(format!(
                        "CAST(1 AS BIGINT) AS {}",
                        super::quote(super::rank::ROW_NUMBER)
                    ));
                }
                expressions.push(format!(
                    "CAST({} AS TINYINT) AS {}",
                    weir_api::changelog::RowKind::UpdateAfter.as_i8(),
                    super::quote(weir_api::changelog::ROW_KIND_COLUMN)
                ));
                self.job.make_projection(&view, expressions);
                return;
            }
            match self.job.operator_input(&at) {
                Some((input, kind)) if kind == "project" || kind == "filter" => at = input,
                _ => return,
            }
        }
    }

    /// The temporal table `plan` (a join's right side) reads, if it is one.
    pub(super) fn temporal_ref(&self, plan: &LogicalPlan) -> Option<TemporalRef> {
        let name = match plan {
            LogicalPlan::SubqueryAlias(a) => a.alias.table().to_owned(),
            LogicalPlan::TableScan(scan) => scan.table_name.table().to_owned(),
            LogicalPlan::Projection(p) => return self.temporal_ref(&p.input),
            _ => return None,
        };
        self.temporal.iter().find(|r| r.name == name).cloned()
    }

    /// A join of a stream with a table `FOR SYSTEM_TIME AS OF` its time attribute: a
    /// `temporal_join`, whose output is insert-only with the stream's time attribute.
    pub(super) fn temporal_join(&mut self, join: &Join, table: TemporalRef) -> Result<Stream> {
        let kind = match join.join_type {
            JoinType::Inner => "inner",
            JoinType::Left => "left",
            other => {
                return Err(self.unsupported_at(
                    "SYSTEM_TIME",
                    &format!("a {other} temporal join"),
                    "a temporal join is INNER or LEFT, as in Flink",
                ));
            }
        };
        let mut left = self.final_rows(&join.left, "SYSTEM_TIME", "a temporal join")?;
        let right = self.plan(&join.right)?;
        self.versions_of_view(&right.node);
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        // The AS OF column, from the marker in the ON condition; the rest of it must be empty.
        let mut marker = None;
        let mut residual = Vec::new();
        if let Some(filter) = &join.filter {
            for conjunct in datafusion::logical_expr::utils::split_conjunction(filter) {
                match conjunct {
                    Expr::ScalarFunction(f) if f.name() == AS_OF => {
                        marker = f.args.first().cloned()
                    }
                    other => residual.push(other.clone()),
                }
            }
        }
        let left_time = marker
            .and_then(|e| physical(unalias(&e), left_schema, &left))
            .filter(|t| left.rowtimes.contains(t))
            .ok_or_else(|| {
                self.unsupported_at(
                    "SYSTEM_TIME",
                    &format!("FOR SYSTEM_TIME AS OF {}", table.time),
                    "the AS OF column is the stream's time attribute (its table's WATERMARK \
                     column, selected unchanged)",
                )
            })?;
        let versioned = || {
            self.unsupported_at(
                "SYSTEM_TIME",
                &format!("`{}` as a versioned table", table.name),
                "a versioned table is a table of changes with a PRIMARY KEY and a WATERMARK: \
                 'upsert-kafka', or 'kafka' with 'debezium-json'",
            )
        };
        let (
            Changes::Updating {
                key: Some(primary), ..
            },
            Some(right_time),
        ) = (&right.changes, right.rowtimes.first().cloned())
        else {
            return Err(versioned());
        };
        let primary = primary.clone();
        if !residual.is_empty() {
            return Err(self.unsupported_at(
                "SYSTEM_TIME",
                "a temporal join condition besides equal keys",
                "join on the versioned table's primary key only; filter the result after the \
                 join",
            ));
        }
        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        for (l, r) in &join.on {
            match (
                physical(unalias(l), left_schema, &left),
                physical(unalias(r), right_schema, &right),
            ) {
                (Some(l), Some(r)) => {
                    left_keys.push(l);
                    right_keys.push(r);
                }
                _ => {
                    return Err(self.unsupported_at(
                        "SYSTEM_TIME",
                        "a temporal join on computed keys",
                        "join on columns; compute the key in a subquery first",
                    ));
                }
            }
        }
        let (mut want, mut got) = (primary.clone(), right_keys.clone());
        want.sort();
        got.sort();
        if want != got {
            return Err(self.unsupported_at(
                "SYSTEM_TIME",
                &format!("a temporal join not on the primary key of `{}`", table.name),
                &format!(
                    "join on the versioned table's whole primary key ({})",
                    primary.join(", ")
                ),
            ));
        }
        let left_wanted = unique(left.columns.iter().chain(&left_keys).chain([&left_time]));
        let right_wanted = unique(right.columns.iter().chain(&right_keys).chain([&right_time]));
        let sides = self.join_sides(&mut left, &right, left_wanted, right_wanted);
        let name = self.next_name("temporal_join");
        let right_keys: Vec<String> = right_keys.iter().map(|c| sides.rename(c)).collect();
        let mut options = serde_json::json!({
            "join": kind,
            "left_keys": left_keys,
            "right_keys": right_keys,
            "left_time": left_time,
            "right_time": sides.rename(&right_time),
        });
        self.add_buffer_bytes(&mut options);
        let late = self.row_late_option("SYSTEM_TIME", "a temporal join")?;
        if let Some(late) = &late {
            options["late"] = late.clone();
        }
        self.job.operator_of_inputs(
            &name,
            "temporal_join",
            &[
                (left.node.clone(), left_keys.clone()),
                (sides.right_node.clone(), right_keys),
            ],
            options,
        );
        if late.is_some() {
            let columns = super::late::same_names(&sides.left_physical);
            self.route_late(&format!("{name}.late"), &columns)?;
        }
        let mut columns = left.columns.clone();
        columns.extend(right.columns.iter().map(|c| sides.rename(c)));
        Ok(Stream {
            node: name,
            columns,
            marker: false,
            changes: Changes::InsertOnly,
            scan: None,
            rowtimes: vec![left_time],
            window: None,
        })
    }
}
