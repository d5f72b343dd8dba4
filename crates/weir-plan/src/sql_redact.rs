//! A SQL script with its secrets hidden: the value of every `'key' = 'value'` pair whose key
//! holds a secret ([`weir_api::secrets::is_secret_key`]) becomes `'******'`, the rest of the
//! text stays byte for byte. What the Hub answers when a job's script is read back.

use sqlparser::dialect::GenericDialect;
use sqlparser::tokenizer::{Location, Token, Tokenizer};
use weir_api::secrets::{REDACTED, is_secret_key};

/// `text` with the value of every secret option replaced by `'******'`. A text that does not
/// tokenize is hidden whole: a script that was stored runs, so this is not expected.
pub fn redact_sql(text: &str) -> String {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, text).tokenize_with_location() else {
        return REDACTED.to_owned();
    };
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let offset = |at: Location| -> Option<usize> {
        let start = *line_starts.get(usize::try_from(at.line).ok()?.checked_sub(1)?)?;
        let column = usize::try_from(at.column).ok()?.checked_sub(1)?;
        match text[start..].char_indices().nth(column) {
            Some((i, _)) => Some(start + i),
            None => Some(text.len()),
        }
    };
    // The spans of secret values, in order.
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let significant: Vec<_> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    for window in significant.windows(3) {
        let [key, eq, value] = window else { continue };
        if let (Token::SingleQuotedString(k), Token::Eq, Token::SingleQuotedString(_)) =
            (&key.token, &eq.token, &value.token)
            && is_secret_key(k)
            && let (Some(from), Some(to)) = (offset(value.span.start), offset(value.span.end))
        {
            cuts.push((from, to));
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to) in cuts {
        out.push_str(&text[at..from]);
        out.push('\'');
        out.push_str(REDACTED);
        out.push('\'');
        at = to;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_hidden_and_everything_else_kept() {
        let sql = "CREATE TABLE t (a INT) WITH (\n  'connector' = 'filesystem',\n  \
                   's3.secret-key'='abc''d é',\n  'properties.sasl.password' = 'p4ss',\n  \
                   'path' = 's3://b/é'\n);\n\
                   -- 's3.secret-key' = 'in a comment'\n";
        let redacted = redact_sql(sql);
        assert_eq!(
            redacted,
            "CREATE TABLE t (a INT) WITH (\n  'connector' = 'filesystem',\n  \
             's3.secret-key'='******',\n  'properties.sasl.password' = '******',\n  \
             'path' = 's3://b/é'\n);\n\
             -- 's3.secret-key' = 'in a comment'\n"
        );
        assert_eq!(redact_sql("SELECT 1"), "SELECT 1");
        assert_eq!(redact_sql("SELECT 'unterminated"), REDACTED);
    }
}
