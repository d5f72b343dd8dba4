//! DataFusion's planning errors as a user of the script reads them: at the token DataFusion's
//! diagnostic points to (or the identifier the message names), without the names Weir's
//! rewriting gives things (`__weir_tumble()`), and, for a column that is neither grouped nor
//! aggregated, saying so rather than "While expanding wildcard". A missing `BY` after `GROUP`
//! is caught before planning, where DataFusion would read `GROUP` as a table alias.

use crate::error::{Position, Result, SqlError};
use crate::script::{Statement, position};
use datafusion::common::DataFusionError;
use datafusion::common::diagnostic::DiagnosticKind;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

/// A DataFusion planning error of `stmt`, located and worded for the script's author.
pub(crate) fn planning_error(stmt: &Statement, e: &DataFusionError) -> SqlError {
    let text = e.strip_backtrace();
    let Some(diagnostic) = e.diagnostic().filter(|d| d.kind == DiagnosticKind::Error) else {
        return located(stmt, &text, None);
    };
    let at = diagnostic
        .span
        .filter(|s| s.start.line > 0 && s.start.column > 0)
        .map(|s| Position {
            line: s.start.line,
            column: s.start.column,
        });
    let mut message = if text.contains("While expanding wildcard") {
        // The diagnostic says what is wrong; DataFusion's text names its own expansion.
        let mut message = diagnostic.message.clone();
        if ["window_start'", "window_end'"]
            .iter()
            .any(|b| message.contains(b))
        {
            message.push_str(
                "\nhelp: a window aggregation groups by both bounds of its windows, as in \
                 Flink: GROUP BY window_start, window_end, <keys>",
            );
        }
        message
    } else {
        text
    };
    for help in &diagnostic.helps {
        if !message.contains(&help.message) {
            message.push_str("\nhelp: ");
            message.push_str(&help.message);
        }
    }
    located(stmt, &message, at)
}

/// `message` of `stmt` at `at`, or else at the identifier it names (`No field named w`,
/// `table 'datafusion.public.nope' not found`), or else at the statement.
fn located(stmt: &Statement, message: &str, at: Option<Position>) -> SqlError {
    let mut cleaned = user_words(message)
        .replace("datafusion.public.", "")
        .replace("Error during planning: ", "")
        .replace("Schema error: ", "");
    // DataFusion names a construct it cannot plan by its whole syntax tree: keep the name.
    if let Some(at) = cleaned.find("Unsupported ast node ") {
        let start = at + "Unsupported ast node ".len();
        let name_len = cleaned[start..]
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .unwrap_or(cleaned.len() - start);
        cleaned.truncate(start + name_len);
    }
    // A window function's own complaint (`TUMBLE takes ...`) is at its name.
    let function = || {
        ["TUMBLE", "HOP", "CUMULATE", "SESSION"]
            .iter()
            .find(|f| cleaned.starts_with(&format!("{f} ")))
            .and_then(|f| stmt.find_word(f))
    };
    let named = || {
        // The column of "'x' must appear in GROUP BY" is its first quoted word.
        let grouped = cleaned.contains("must appear in GROUP BY").then_some("'");
        ["No field named ", "table '"]
            .into_iter()
            .chain(grouped)
            .find_map(|marker| {
                let at = cleaned.find(marker)? + marker.len();
                let rest = &cleaned[at..];
                let name: String = rest
                    .trim_start_matches(['"', '\''])
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
                    .collect();
                name.trim_end_matches('.')
                    .rsplit('.')
                    .next()
                    .filter(|n| !n.is_empty())
                    .and_then(|n| stmt.find_word(n))
            })
    };
    let position = at
        .or_else(function)
        .or_else(named)
        .unwrap_or(stmt.here.position);
    stmt.here.at(position).invalid(cleaned)
}

/// `message` without Weir's internal names: the qualifier of a window table function's
/// columns (`"__weir_tumble()".auction` is `auction`), the function itself by its SQL name
/// (`__weir_hop()` is `HOP(...)`), and `count(Int64(1))` as the script wrote it, `COUNT(*)`.
fn user_words(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(found) = rest.find("__weir_") {
        let after = &rest[found + "__weir_".len()..];
        let name_len = after
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let mut tail = &after[name_len..];
        let call = tail.starts_with("()");
        if call {
            tail = &tail[2..];
        }
        // `"__weir_tumble()".auction`: the quotes are the qualifier's own.
        let quoted = found > 0 && rest[..found].ends_with('"') && tail.starts_with("\".");
        let start = if quoted { found - 1 } else { found };
        out.push_str(&rest[..start]);
        if quoted {
            tail = &tail[1..];
        }
        if let Some(column) = tail.strip_prefix('.').filter(|_| call) {
            // A qualifier: the column alone says it.
            rest = column;
        } else if call {
            out.push_str(&name.to_ascii_uppercase());
            out.push_str("(...)");
            rest = tail;
        } else {
            out.push_str(&rest[start..found + "__weir_".len() + name_len]);
            rest = &rest[found + "__weir_".len() + name_len..];
        }
    }
    out.push_str(rest);
    out.replace("count(Int64(1))", "COUNT(*)")
}

/// Refuses a `GROUP` not followed by `BY` (outside `WITHIN GROUP`), at the `GROUP`: DataFusion
/// would read it as a table alias and report the columns as neither grouped nor aggregated.
pub(crate) fn check_group_by(stmt: &Statement) -> Result<()> {
    let words: Vec<_> = stmt.significant().collect();
    for (i, t) in words.iter().enumerate() {
        let Token::Word(w) = &t.token else { continue };
        if w.quote_style.is_some() || w.keyword != Keyword::GROUP {
            continue;
        }
        let within =
            i > 0 && matches!(&words[i - 1].token, Token::Word(p) if p.keyword == Keyword::WITHIN);
        let by = matches!(
            words.get(i + 1).map(|n| &n.token),
            Some(Token::Word(n)) if n.keyword == Keyword::BY
        );
        if !within && !by {
            return Err(stmt
                .here
                .at(position(t))
                .syntax("expected BY after GROUP (GROUP BY window_start, window_end, ...)"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script;

    #[test]
    fn an_unsupported_syntax_node_is_named_not_dumped() {
        let stmt = &script::split("INSERT INTO o SELECT a FROM t", "job.sql").unwrap()[0];
        let message = "This feature is not implemented: Unsupported ast node Pivot { table: \
            Table { name: ObjectName([..]) }, alias: None } in create_relation";
        assert_eq!(
            located(stmt, message, None).to_string(),
            "job.sql:1:1: This feature is not implemented: Unsupported ast node Pivot"
        );
    }

    #[test]
    fn internal_names_are_said_as_the_script_says_them() {
        assert_eq!(
            user_words(
                "No field named auctoin. Did you mean '\"__weir_tumble()\".auction'? Valid \
                 fields are \"__weir_tumble()\".auction, __weir_hop().ts."
            ),
            "No field named auctoin. Did you mean 'auction'? Valid fields are auction, ts."
        );
        assert_eq!(
            user_words("the expression \"__weir_tumble().window_end\" at position 1"),
            "the expression \"window_end\" at position 1"
        );
        assert_eq!(
            user_words("table '__weir_session()' in count(Int64(1))"),
            "table 'SESSION(...)' in COUNT(*)"
        );
        assert_eq!(user_words("__weir_rows stays"), "__weir_rows stays");
    }
}
