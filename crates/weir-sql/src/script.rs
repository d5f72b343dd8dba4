//! A script is split into statements at top-level semicolons, keeping every token's position in
//! the file so that errors point into the script, not into a fragment.

use crate::error::{Here, Position, Result};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace};

/// One statement of a script: its tokens (without the final semicolon), positions included.
#[derive(Debug, Clone)]
pub(crate) struct Statement {
    pub(crate) tokens: Vec<TokenWithSpan>,
    pub(crate) here: Here,
}

impl Statement {
    /// The tokens that are not whitespace or comments.
    pub(crate) fn significant(&self) -> impl Iterator<Item = &TokenWithSpan> + '_ {
        self.tokens.iter().filter(|t| !is_trivia(&t.token))
    }

    /// The statement's leading keyword, if it starts with one.
    pub(crate) fn leading_keyword(&self) -> Option<Keyword> {
        match self.significant().next().map(|t| &t.token) {
            Some(Token::Word(w)) => Some(w.keyword),
            _ => None,
        }
    }

    /// The position of the first significant token whose text is `word` (case-insensitive).
    pub(crate) fn find_word(&self, word: &str) -> Option<Position> {
        self.significant().find_map(|t| match &t.token {
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word) => {
                Some(position(t))
            }
            _ => None,
        })
    }
}

/// Whether a token is whitespace or a comment.
pub(crate) fn is_trivia(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_))
}

/// The 1-based position of a token.
pub(crate) fn position(token: &TokenWithSpan) -> Position {
    Position {
        line: token.span.start.line,
        column: token.span.start.column,
    }
}

/// Splits `sql` into statements; empty statements (`;;`, trailing comments) are skipped.
///
/// # Errors
///
/// A syntax error with the position when the text cannot be tokenized (e.g. an unterminated
/// string).
pub(crate) fn split(sql: &str, file: &str) -> Result<Vec<Statement>> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| {
            Here {
                file: file.to_owned(),
                position: Position {
                    line: e.location.line,
                    column: e.location.column,
                },
            }
            .syntax(e.message)
        })?;
    let mut statements = Vec::new();
    let mut current: Vec<TokenWithSpan> = Vec::new();
    let mut flush = |current: &mut Vec<TokenWithSpan>| {
        let first = current.iter().find(|t| !is_trivia(&t.token)).map(position);
        if let Some(first) = first {
            statements.push(Statement {
                tokens: std::mem::take(current),
                here: Here {
                    file: file.to_owned(),
                    position: first,
                },
            });
        }
        current.clear();
    };
    for token in tokens {
        match token.token {
            Token::SemiColon => flush(&mut current),
            Token::EOF => {}
            Token::Whitespace(Whitespace::SingleLineComment { .. })
            | Token::Whitespace(Whitespace::MultiLineComment(_)) => current.push(token),
            _ => current.push(token),
        }
    }
    flush(&mut current);
    Ok(statements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_top_level_semicolons_with_positions() {
        let sql = "-- a comment\nSET 'a' = ';';\n\n  INSERT INTO t\nSELECT 1;;\n-- end\n";
        let statements = split(sql, "job.sql").unwrap();
        assert_eq!(statements.len(), 2);
        assert_eq!(statements[0].here.position, Position { line: 2, column: 1 });
        assert_eq!(statements[0].leading_keyword(), Some(Keyword::SET));
        assert_eq!(statements[1].here.position, Position { line: 4, column: 3 });
        assert_eq!(
            statements[1].find_word("select"),
            Some(Position { line: 5, column: 1 })
        );
    }

    #[test]
    fn unterminated_strings_name_the_position() {
        let err = split("SELECT 'abc", "job.sql").unwrap_err().to_string();
        assert!(err.starts_with("job.sql:1:"), "{err}");
    }
}
