//! What a SQL text must pass before anything parses or plans it: its expressions nest at most
//! so deep ([`crate::sql_depth`]) and no constant call asks for a huge value
//! ([`crate::sql_constants`]). Both look at tokens only, so a text is refused before a syntax
//! tree or a folded constant exists.

use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{TokenWithSpan, Tokenizer};

/// Why a SQL text is refused, at the 1-based line and column of the token to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlRefusal {
    /// 1-based line.
    pub line: u64,
    /// 1-based column.
    pub column: u64,
    /// What a user reads, without the position.
    pub message: String,
}

/// Checks the tokens of one statement or expression, its expressions nesting at most
/// `depth_limit` levels.
///
/// # Errors
/// The first [`SqlRefusal`] of either check.
pub fn check_tokens(tokens: &[TokenWithSpan], depth_limit: usize) -> Result<(), SqlRefusal> {
    crate::sql_depth::check_tokens(tokens, depth_limit).map_err(|e| SqlRefusal {
        line: e.line,
        column: e.column,
        message: e.message(),
    })?;
    crate::sql_constants::check_tokens(tokens).map_err(|e| SqlRefusal {
        line: e.line,
        column: e.column,
        message: e.message(),
    })
}

/// [`check_tokens`] over a text; a text that does not tokenize passes (the parser reports it,
/// with its position).
///
/// # Errors
/// As [`check_tokens`], with positions in `text`.
pub fn check_text(text: &str, depth_limit: usize) -> Result<(), SqlRefusal> {
    match Tokenizer::new(&GenericDialect {}, text).tokenize_with_location() {
        Ok(tokens) => check_tokens(&tokens, depth_limit),
        Err(_) => Ok(()),
    }
}
