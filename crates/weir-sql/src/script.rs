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
/// A script file's bytes as text: without the UTF-8 byte order mark some editors write, and
/// invalid UTF-8 refused at its line and column.
///
/// # Errors
/// A syntax error at the first byte that is not UTF-8.
pub fn script_text(bytes: Vec<u8>, file: &str) -> Result<String> {
    let bytes = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        // Both are valid UTF-8 up to there, so the text before the bad byte is a str.
        let before = std::str::from_utf8(valid).unwrap_or_default();
        let line = before.matches('\n').count() as u64 + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
        let byte = e.as_bytes().get(valid.len()).copied().unwrap_or_default();
        Here {
            file: file.to_owned(),
            position: Position { line, column },
        }
        .syntax(format!(
            "byte 0x{byte:02x} is not UTF-8: a script is UTF-8 text"
        ))
    })
}

pub(crate) fn split(sql: &str, file: &str) -> Result<Vec<Statement>> {
    // A byte order mark is not a token.
    let sql = sql.strip_prefix('\u{feff}').unwrap_or(sql);
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
    fn a_byte_order_mark_is_dropped_and_invalid_utf8_is_located() {
        let text = script_text(b"\xEF\xBB\xBFSET 'a' = 'b';".to_vec(), "bom.sql").unwrap();
        assert_eq!(text, "SET 'a' = 'b';");
        assert_eq!(split("\u{feff}SET 'a' = 'b';", "bom.sql").unwrap().len(), 1);
        let err = script_text(
            b"SET 'a' = 'b';\n  -- caf\xC3\xA9 \xFF\n".to_vec(),
            "bad.sql",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("bad.sql:2:11:"), "{err}");
        assert!(err.contains("byte 0xff is not UTF-8"), "{err}");
    }

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
