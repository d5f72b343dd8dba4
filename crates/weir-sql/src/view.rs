//! `CREATE [TEMPORARY] VIEW name [(columns)] AS query`: a named query, as in Flink SQL.
//!
//! A view runs nothing by itself. It is planned by DataFusion when declared (so an unknown
//! column is an error at the view) and registered in the script's catalog; every `INSERT`
//! that reads it gets the view's plan inlined and translated with the rest of its query, so a
//! view read by two `INSERT`s runs its operators once for each. Window table functions may
//! appear inside a view's query, and may read a view (`TUMBLE(TABLE v, DESCRIPTOR(t), ...)`
//! where `t` is a time attribute of `v`): the view's optimized plan is kept for that.

use crate::error::Result;
use crate::parse_statement;
use crate::planning_errors::planning_error;
use crate::script::Statement;
use crate::tvf::TvfInput;
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;
use std::sync::Arc;

/// Whether `stmt` is `CREATE [OR REPLACE] [TEMPORARY | TEMP] VIEW ...`.
pub(crate) fn is_create_view(stmt: &Statement) -> bool {
    let words = stmt.significant().skip(1).map_while(|t| match &t.token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
        _ => None,
    });
    for keyword in words {
        match keyword {
            Keyword::OR | Keyword::REPLACE | Keyword::TEMPORARY | Keyword::TEMP => {}
            Keyword::VIEW => return true,
            _ => return false,
        }
    }
    false
}

/// Plans the view of `stmt` and registers it in `ctx`; returns its name and what a window TVF
/// over it reads. `taken` says whether a table or view of that name was declared before.
///
/// # Errors
/// A located syntax or planning error; `OR REPLACE` and `MATERIALIZED`, which a job script
/// has no use for; a name declared before.
pub(crate) async fn create_view(
    ctx: &SessionContext,
    stmt: &Statement,
    taken: impl Fn(&str) -> bool,
) -> Result<(String, TvfInput)> {
    let here = &stmt.here;
    let tokens = crate::tvf::rewrite(&stmt.tokens, here)?;
    let mut parsed = parse_statement(tokens, here)?;
    let SqlStatement::CreateView(view) = &mut parsed else {
        return Err(here.invalid("expected CREATE [TEMPORARY] VIEW name AS SELECT ..."));
    };
    if view.or_replace || view.materialized {
        let what = if view.or_replace {
            "CREATE OR REPLACE VIEW"
        } else {
            "CREATE MATERIALIZED VIEW"
        };
        return Err(here.unsupported(
            what,
            "a script declares each view once: write CREATE [TEMPORARY] VIEW",
        ));
    }
    let name = match view.name.0.as_slice() {
        [part] => match part.as_ident() {
            Some(ident) => crate::ddl::normalize(ident),
            None => return Err(here.invalid(format!("`{}` is not a view name", view.name))),
        },
        _ => {
            return Err(here.invalid(format!(
                "view `{}`: a view name has one part (no catalog or schema)",
                view.name
            )));
        }
    };
    // Every view of a script lives as long as its job: TEMPORARY changes nothing.
    view.temporary = false;
    if taken(&name) {
        return Err(here.invalid(format!(
            "`{name}` is declared twice (a table and a view share one namespace)"
        )));
    }
    let state = ctx.state();
    let plan = state
        .statement_to_plan(DfStatement::Statement(Box::new(parsed)))
        .await
        .map_err(|e| planning_error(stmt, &e))?;
    let LogicalPlan::Ddl(DdlStatement::CreateView(create)) = &plan else {
        return Err(here.invalid("expected CREATE [TEMPORARY] VIEW name AS SELECT ..."));
    };
    // What a window TVF over the view reads: the query, optimized as an INSERT's is.
    let schema = Arc::new(create.input.schema().as_arrow().clone());
    let optimized = state
        .optimize(&create.input)
        .map(Arc::new)
        .map_err(|e| e.strip_backtrace());
    // Registers the view; a view's DDL reads and writes no data.
    ctx.execute_logical_plan(plan)
        .await
        .map_err(|e| planning_error(stmt, &e))?;
    Ok((
        name,
        TvfInput::View {
            schema,
            plan: optimized,
        },
    ))
}
