//! A bound on how deeply a SQL text's expressions nest, checked on its tokens before anything
//! builds a syntax tree.
//!
//! Parsers build `a + b + c + ...` in a loop, so a chain of 20,000 terms parses without
//! recursion into a tree 20,000 levels deep, and every later pass that recurses over it (cloning
//! it, planning it, dropping it) overflows the thread's stack and aborts the whole process. A
//! tree is never deeper than its chains of operators plus its nested brackets, which the tokens
//! show without a tree: [`check_tokens`] refuses a text whose bound exceeds
//! [`MAX_EXPRESSION_DEPTH`], naming the token where it does.
//!
//! The bound counts, along the path from the statement to a token, one level per open bracket
//! (`(`, `[`, `{` and `CASE`) plus every operator before it in the same item of each bracket
//! (items are separated by commas and clause keywords such as `FROM` and `WHERE`, and by
//! `WHEN`, `THEN` and `ELSE` inside `CASE`). Every
//! operator token and operator keyword counts, so the bound is never below the depth of the
//! tree a parser builds; it is above it for wide flat items (`a + b = c + d` counts 3).

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

/// The deepest expression accepted: chained operators plus nested brackets, 1,000 (the default
/// nesting limit of Jackson, which reads Flink's JSON, is the same).
pub const MAX_EXPRESSION_DEPTH: usize = 1_000;

/// The stack a thread needs to plan, evaluate and drop an expression [`MAX_EXPRESSION_DEPTH`]
/// levels deep, with room to spare (a debug build planned one in 8 MiB): the `weir` command's
/// runtime threads get it, and a program that embeds Weir should give its runtime's threads as
/// much (`tokio::runtime::Builder::thread_stack_size`).
pub const THREAD_STACK_BYTES: usize = 16 << 20;

/// The deepest expression text a job spec may hold: twice [`MAX_EXPRESSION_DEPTH`], because
/// the SQL compiler writes every operation of an accepted query in parentheses of its own
/// (`((a + 1) + 1)`), each of which the bound counts.
pub const MAX_SPEC_EXPRESSION_DEPTH: usize = 2 * MAX_EXPRESSION_DEPTH;

/// Where a text's expressions nest deeper than [`MAX_EXPRESSION_DEPTH`]: the 1-based line and
/// column of the token at which the bound was passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// 1-based line of the token.
    pub line: u64,
    /// 1-based column of the token.
    pub column: u64,
    /// The limit passed.
    pub limit: usize,
}

impl TooDeep {
    /// What a user reads, without the position (callers place it in their own location form).
    pub fn message(&self) -> String {
        format!(
            "the expression nests more than {} levels deep here (each \
             chained operator and each nested bracket is a level); split it, or write a long \
             OR of equalities as IN (...)",
            self.limit
        )
    }
}

/// What a bracket was opened by: a closing token only closes its own kind (`END` only a `CASE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opener {
    Statement,
    Bracket,
    Case,
}

/// One open bracket: the operators of its current item and the deepest bracket closed in it.
#[derive(Debug, Clone, Copy)]
struct Frame {
    opener: Opener,
    ops: usize,
    child: usize,
}

/// Checks the tokens of one statement or expression (whitespace may be among them) against
/// `limit` ([`MAX_EXPRESSION_DEPTH`] for SQL scripts, [`MAX_SPEC_EXPRESSION_DEPTH`] for job
/// specs).
///
/// # Errors
/// [`TooDeep`] at the first token where the bound passes `limit`.
pub fn check_tokens<'a>(
    tokens: impl IntoIterator<Item = &'a TokenWithSpan>,
    limit: usize,
) -> Result<(), TooDeep> {
    let mut frames = vec![Frame {
        opener: Opener::Statement,
        ops: 0,
        child: 0,
    }];
    // The bound of the current path without the innermost bracket's closed children: one per
    // open bracket plus the operators of each one's current item.
    let mut path = 0_usize;
    // `IS [NOT] DISTINCT FROM` is an operator, not the FROM clause.
    let mut after_distinct = false;
    for t in tokens {
        if matches!(t.token, Token::Whitespace(_)) {
            continue;
        }
        let kind = classify(&t.token, frames.last().map(|f| f.opener), after_distinct);
        after_distinct = matches!(&t.token, Token::Word(w) if w.keyword == Keyword::DISTINCT);
        match kind {
            Kind::Open(opener) => {
                if opener == Opener::Bracket && t.token == Token::LBracket {
                    // A subscript chains like an operator (`a[1][2]` nests twice).
                    bump(&mut frames, &mut path);
                }
                frames.push(Frame {
                    opener,
                    ops: 0,
                    child: 0,
                });
                path += 1;
            }
            Kind::Close(opener) => {
                if frames.len() > 1
                    && frames.last().is_some_and(|f| f.opener == opener)
                    && let Some(closed) = frames.pop()
                {
                    path -= closed.ops + 1;
                    let depth = closed.ops + 1 + closed.child;
                    if let Some(parent) = frames.last_mut() {
                        parent.child = parent.child.max(depth);
                    }
                }
            }
            Kind::Separator => {
                if let Some(frame) = frames.last_mut() {
                    path -= frame.ops;
                    frame.ops = 0;
                    frame.child = 0;
                }
            }
            Kind::Operator => bump(&mut frames, &mut path),
            Kind::Other => {}
        }
        let child = frames.last().map_or(0, |f| f.child);
        if path + child > limit {
            return Err(TooDeep {
                line: t.span.start.line,
                column: t.span.start.column,
                limit,
            });
        }
    }
    Ok(())
}

fn bump(frames: &mut [Frame], path: &mut usize) {
    if let Some(frame) = frames.last_mut() {
        frame.ops += 1;
        *path += 1;
    }
}

enum Kind {
    Open(Opener),
    Close(Opener),
    Separator,
    Operator,
    Other,
}

fn classify(token: &Token, innermost: Option<Opener>, after_distinct: bool) -> Kind {
    let in_case = innermost == Some(Opener::Case);
    match token {
        Token::LParen | Token::LBrace | Token::LBracket => Kind::Open(Opener::Bracket),
        Token::RParen | Token::RBrace | Token::RBracket => Kind::Close(Opener::Bracket),
        Token::Comma => Kind::Separator,
        Token::Word(w) if w.quote_style.is_none() => match w.keyword {
            Keyword::CASE => Kind::Open(Opener::Case),
            Keyword::END => Kind::Close(Opener::Case),
            Keyword::WHEN | Keyword::THEN | Keyword::ELSE if in_case => Kind::Separator,
            Keyword::FROM if after_distinct => Kind::Operator,
            // A clause ends every expression before it.
            Keyword::SELECT
            | Keyword::FROM
            | Keyword::WHERE
            | Keyword::GROUP
            | Keyword::HAVING
            | Keyword::ORDER
            | Keyword::LIMIT
            | Keyword::OFFSET
            | Keyword::JOIN
            | Keyword::ON
            | Keyword::USING
            | Keyword::UNION
            | Keyword::EXCEPT
            | Keyword::INTERSECT
            | Keyword::WINDOW
            | Keyword::QUALIFY
            | Keyword::VALUES
            | Keyword::PARTITION => Kind::Separator,
            Keyword::AND
            | Keyword::OR
            | Keyword::XOR
            | Keyword::NOT
            | Keyword::IS
            | Keyword::IN
            | Keyword::BETWEEN
            | Keyword::LIKE
            | Keyword::ILIKE
            | Keyword::SIMILAR
            | Keyword::REGEXP
            | Keyword::RLIKE
            | Keyword::AT
            | Keyword::COLLATE
            | Keyword::OVERLAPS
            | Keyword::DIV
            | Keyword::MEMBER
            | Keyword::OPERATOR => Kind::Operator,
            _ => Kind::Other,
        },
        Token::Word(_)
        | Token::Number(..)
        | Token::Char(_)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::Whitespace(_)
        | Token::SemiColon
        | Token::Placeholder(_)
        | Token::EOF => Kind::Other,
        // Every other symbol is an operator or an accessor (`+`, `||`, `::`, `.`, `->`...).
        _ => Kind::Operator,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::GenericDialect;
    use sqlparser::tokenizer::Tokenizer;

    fn check_text(text: &str, limit: usize) -> Result<(), TooDeep> {
        let tokens = Tokenizer::new(&GenericDialect {}, text)
            .tokenize_with_location()
            .unwrap_or_default();
        check_tokens(&tokens, limit)
    }

    fn depth_ok(text: &str) -> bool {
        check_text(text, MAX_EXPRESSION_DEPTH).is_ok()
    }

    fn chain(op: &str, terms: usize) -> String {
        vec!["1"; terms].join(op)
    }

    #[test]
    fn chains_of_operators_count_each_operator() {
        assert!(depth_ok(&chain(" + ", MAX_EXPRESSION_DEPTH)));
        assert!(!depth_ok(&chain(" + ", MAX_EXPRESSION_DEPTH + 2)));
        assert!(!depth_ok(&chain(" AND ", 5_000)));
        assert!(!depth_ok(&chain("::", 5_000)));
        assert!(!depth_ok(&format!("a{}", "[1]".repeat(2_000))));
        assert!(!depth_ok(&format!("x {}", "IS NULL ".repeat(2_000))));
    }

    #[test]
    fn nested_brackets_count_each_level() {
        let nested = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        assert!(depth_ok(&nested(MAX_EXPRESSION_DEPTH - 1)));
        assert!(!depth_ok(&nested(MAX_EXPRESSION_DEPTH + 1)));
        let calls = |n: usize| format!("{}1{}", "abs(".repeat(n), ")".repeat(n));
        assert!(!depth_ok(&calls(20_000)));
        // Operators outside a deep bracket add to it.
        let half = MAX_EXPRESSION_DEPTH / 2 + 10;
        assert!(!depth_ok(&format!(
            "{} + {}",
            chain(" + ", half),
            nested(half)
        )));
    }

    #[test]
    fn siblings_do_not_add_up() {
        // A wide SELECT list, a long IN list, a CASE with many branches: each item is shallow.
        let items: Vec<String> = (0..3_000).map(|i| format!("a{i} + b{i} AS c{i}")).collect();
        assert!(depth_ok(&format!("SELECT {} FROM t", items.join(", "))));
        let list: Vec<String> = (0..5_000).map(|i| i.to_string()).collect();
        assert!(depth_ok(&format!("x IN ({})", list.join(", "))));
        let branches: String = (0..3_000)
            .map(|i| format!(" WHEN x = {i} THEN y + {i}"))
            .collect();
        assert!(depth_ok(&format!("CASE{branches} ELSE 0 END")));
    }

    #[test]
    fn clauses_are_siblings_but_is_distinct_from_chains() {
        let long = chain(" + ", 900);
        assert!(depth_ok(&format!(
            "SELECT {long} FROM t WHERE {long} GROUP BY {long} HAVING {long}"
        )));
        let distinct = vec!["a"; 2_000].join(" IS DISTINCT FROM ");
        assert!(!depth_ok(&format!("SELECT {distinct} FROM t")));
    }

    #[test]
    fn a_chain_around_case_expressions_still_counts() {
        // `END` closes the CASE, so the operators between them are one chain.
        let text = vec!["CASE WHEN x THEN 1 END"; 3_000].join(" + ");
        assert!(!depth_ok(&text));
    }

    #[test]
    fn the_error_names_the_token_where_the_bound_passes() {
        let text = format!("SELECT\n  {}", chain("+", 1_500));
        let err = check_text(&text, MAX_EXPRESSION_DEPTH).unwrap_err();
        assert_eq!(err.line, 2);
        // `1+` per term from column 3: the 1001st `+` is at 3 + 2 * 1000 + 1.
        assert_eq!(err.column, 3 + 2 * 1_000 + 1);
        assert!(err.message().contains("1000 levels"), "{}", err.message());
    }

    #[test]
    fn unbalanced_or_untokenizable_text_is_left_to_the_parser() {
        assert!(depth_ok(")))) + 1"));
        assert!(depth_ok("END END"));
        assert!(depth_ok("'unterminated"));
    }
}
