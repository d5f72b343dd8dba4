//! Errors of the SQL front end: every one names the file and the position in it.

use std::fmt;

/// A position in a SQL script: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    /// 1-based line.
    pub line: u64,
    /// 1-based column (characters).
    pub column: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// What went wrong while compiling a SQL script.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// The text is not valid SQL (or not valid Weir SQL).
    #[error("{file}:{position}: syntax error: {message}")]
    Syntax {
        /// The script.
        file: String,
        /// Where.
        position: Position,
        /// What the parser expected or found.
        message: String,
    },
    /// A construct Weir cannot run as a stream (ORDER BY, a join, a non-windowed aggregate).
    #[error("{file}:{position}: {construct} is not supported in a streaming job: {reason}")]
    Unsupported {
        /// The script.
        file: String,
        /// Where the construct starts.
        position: Position,
        /// The construct, e.g. `ORDER BY`.
        construct: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A statement is well formed but wrong: unknown table, bad option, type mismatch.
    #[error("{file}:{position}: {message}")]
    Invalid {
        /// The script.
        file: String,
        /// Where the statement (or the offending part) starts.
        position: Position,
        /// What is wrong.
        message: String,
    },
}

/// Result of the SQL front end.
pub type Result<T> = std::result::Result<T, SqlError>;

/// Where in the script a statement is, to build errors.
#[derive(Debug, Clone)]
pub(crate) struct Here {
    pub(crate) file: String,
    pub(crate) position: Position,
}

impl Here {
    pub(crate) fn invalid(&self, message: impl Into<String>) -> SqlError {
        SqlError::Invalid {
            file: self.file.clone(),
            position: self.position,
            message: message.into(),
        }
    }

    pub(crate) fn at(&self, position: Position) -> Here {
        Here {
            file: self.file.clone(),
            position,
        }
    }

    pub(crate) fn syntax(&self, message: impl Into<String>) -> SqlError {
        SqlError::Syntax {
            file: self.file.clone(),
            position: self.position,
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(
        &self,
        construct: impl Into<String>,
        reason: impl Into<String>,
    ) -> SqlError {
        SqlError::Unsupported {
            file: self.file.clone(),
            position: self.position,
            construct: construct.into(),
            reason: reason.into(),
        }
    }
}

/// `" (did you mean 'x'?)"` for the candidate closest to `word` (by edit distance, ignoring
/// case), when one is close enough to be a likely typo; empty otherwise.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    use datafusion::common::utils::datafusion_strsim::levenshtein;
    let word = word.to_ascii_lowercase();
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (levenshtein(&word, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| format!(" (did you mean '{c}'?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn a_close_name_is_suggested_and_a_far_one_is_not() {
        let known = ["path", "format", "batch-size"];
        assert_eq!(did_you_mean("fromat", known), " (did you mean 'format'?)");
        assert_eq!(did_you_mean("PATH", known), " (did you mean 'path'?)");
        assert_eq!(did_you_mean("scan.startup.mode", known), "");
    }
}
