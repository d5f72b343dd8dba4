//! A bound on the values that constant folding would build from a SQL text, checked on its
//! tokens before anything is planned.
//!
//! A planner evaluates calls whose arguments are all constants while it plans, so
//! `repeat('x', 100000000)` in a validate request built a 100 MB string inside the Hub (1.2 GB
//! at its peak; with `1e9`, 5 GB and still growing) before any job existed. A few functions
//! make a result much larger than their arguments (`repeat`, `lpad`, `rpad`, `array_repeat`,
//! `array_resize`, `range`, `generate_series`); [`check_tokens`] refuses a call of one of them
//! whose literal count, or its product with the counts of such calls inside its arguments, is
//! above [`MAX_CONSTANT_ELEMENTS`]. Calls with counts taken from columns are data-dependent and
//! left to the job.

use sqlparser::tokenizer::{Token, TokenWithSpan};

/// The most characters or elements a call of an amplifying function may be asked for with
/// literal arguments: 10 million (a 10 MB string).
pub const MAX_CONSTANT_ELEMENTS: u128 = 10_000_000;

/// A call whose constant result would be larger than [`MAX_CONSTANT_ELEMENTS`]: the function,
/// the size it asks for, and the 1-based position of its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    /// The function called.
    pub function: String,
    /// The characters or elements asked for (with the calls nested in it).
    pub elements: u128,
    /// 1-based line of the function's name.
    pub line: u64,
    /// 1-based column of the function's name.
    pub column: u64,
}

impl TooLarge {
    /// What a user reads, without the position.
    pub fn message(&self) -> String {
        format!(
            "{}(...) asks for {} characters or elements, more than the {MAX_CONSTANT_ELEMENTS} \
             a call with literal arguments may build",
            self.function, self.elements
        )
    }
}

/// Where the size a call asks for is among its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    /// The argument at this index (`repeat(s, n)`, `lpad(s, n)`).
    Argument(usize),
    /// `(start, stop[, step])`: `|stop - start| / |step|`.
    Range,
}

fn amplifier(name: &str) -> Option<Count> {
    match name.to_ascii_lowercase().as_str() {
        "repeat" | "lpad" | "rpad" | "array_repeat" | "list_repeat" | "array_resize"
        | "list_resize" => Some(Count::Argument(1)),
        "range" | "generate_series" => Some(Count::Range),
        _ => None,
    }
}

/// An open bracket; for a call of an amplifying function, what it is and what it was given.
#[derive(Debug)]
struct Frame {
    call: Option<(String, Count, u64, u64)>,
    /// The literal value of each argument so far (`None`: not a lone number).
    arguments: Vec<Option<i128>>,
    /// The current argument: a lone number (with its sign) seen so far, or not.
    current: Literal,
    /// The largest size asked for by the calls nested in this bracket.
    inner: u128,
}

#[derive(Debug, Clone, Copy)]
enum Literal {
    Empty,
    Minus,
    Number(i128),
    Other,
}

impl Literal {
    fn push(self, token: &Token) -> Literal {
        match (self, token) {
            (_, Token::Whitespace(_)) => self,
            (Literal::Empty, Token::Minus) => Literal::Minus,
            (Literal::Empty, Token::Number(n, _)) => {
                parse(n).map_or(Literal::Other, Literal::Number)
            }
            (Literal::Minus, Token::Number(n, _)) => {
                parse(n).map_or(Literal::Other, |v| Literal::Number(-v))
            }
            _ => Literal::Other,
        }
    }

    fn value(self) -> Option<i128> {
        match self {
            Literal::Number(v) => Some(v),
            _ => None,
        }
    }
}

/// An integer literal (`100000000`, `1e9`); `None` for fractions and anything else.
fn parse(text: &str) -> Option<i128> {
    if let Ok(v) = text.parse::<i128>() {
        return Some(v);
    }
    let v = text.parse::<f64>().ok()?;
    (v.is_finite() && v.fract() == 0.0 && v.abs() < 1e30).then_some(v as i128)
}

impl Frame {
    fn new(call: Option<(String, Count, u64, u64)>) -> Self {
        Frame {
            call,
            arguments: Vec::new(),
            current: Literal::Empty,
            inner: 0,
        }
    }

    /// The size the call asks for, its nested calls included; 0 when not an amplifier or when
    /// a count is not a literal.
    fn size(&self) -> u128 {
        let Some((_, count, _, _)) = &self.call else {
            return self.inner;
        };
        let own = match count {
            Count::Argument(i) => self
                .arguments
                .get(*i)
                .copied()
                .flatten()
                .map_or(0, |n| n.max(0) as u128),
            Count::Range => match self.arguments.as_slice() {
                [Some(stop)] => stop.unsigned_abs(),
                [Some(start), Some(stop)] => stop.abs_diff(*start),
                [Some(start), Some(stop), Some(step)] if *step != 0 => {
                    stop.abs_diff(*start) / step.unsigned_abs()
                }
                _ => 0,
            },
        };
        own.saturating_mul(self.inner.max(1))
    }
}

/// Checks the tokens of one statement or expression.
///
/// # Errors
/// [`TooLarge`] for the first call (by the position of its closing bracket) that asks for too
/// much.
pub fn check_tokens<'a>(
    tokens: impl IntoIterator<Item = &'a TokenWithSpan>,
) -> Result<(), TooLarge> {
    let mut frames = vec![Frame::new(None)];
    // The amplifying function named by the last significant token, if any.
    let mut named: Option<(String, Count, u64, u64)> = None;
    for t in tokens {
        if matches!(t.token, Token::Whitespace(_)) {
            continue;
        }
        let next_named = match &t.token {
            Token::Word(w) if w.quote_style.is_none() => amplifier(&w.value).map(|count| {
                (
                    w.value.to_ascii_lowercase(),
                    count,
                    t.span.start.line,
                    t.span.start.column,
                )
            }),
            _ => None,
        };
        match &t.token {
            Token::LParen | Token::LBracket | Token::LBrace => {
                if let Some(frame) = frames.last_mut() {
                    frame.current = Literal::Other;
                }
                let call = if t.token == Token::LParen {
                    named.take()
                } else {
                    None
                };
                frames.push(Frame::new(call));
            }
            Token::RParen | Token::RBracket | Token::RBrace if frames.len() > 1 => {
                if let Some(mut closed) = frames.pop() {
                    let last = closed.current.value();
                    closed.arguments.push(last);
                    let size = closed.size();
                    if let Some((function, _, line, column)) = &closed.call
                        && size > MAX_CONSTANT_ELEMENTS
                    {
                        return Err(TooLarge {
                            function: function.clone(),
                            elements: size,
                            line: *line,
                            column: *column,
                        });
                    }
                    if let Some(parent) = frames.last_mut() {
                        parent.inner = parent.inner.max(size);
                    }
                }
            }
            Token::Comma => {
                if let Some(frame) = frames.last_mut() {
                    let value = frame.current.value();
                    frame.arguments.push(value);
                    frame.current = Literal::Empty;
                }
            }
            token => {
                if let Some(frame) = frames.last_mut() {
                    frame.current = frame.current.push(token);
                }
            }
        }
        named = next_named;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<(), TooLarge> {
        let tokens =
            sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::GenericDialect {}, text)
                .tokenize_with_location()
                .unwrap_or_default();
        check_tokens(&tokens)
    }

    #[test]
    fn literal_counts_above_the_bound_are_refused_at_the_function() {
        let err = check("SELECT a,\n  repeat('x', 100000000) FROM t").unwrap_err();
        assert_eq!(
            (err.function.as_str(), err.elements),
            ("repeat", 100_000_000)
        );
        assert_eq!((err.line, err.column), (2, 3));
        assert!(
            err.message().contains("more than the 10000000"),
            "{}",
            err.message()
        );
        assert!(check("SELECT REPEAT('x', 1e9)").is_err());
        assert!(check("SELECT lpad('x', 20000000, 'y')").is_err());
        assert!(check("SELECT array_repeat(1, 50000000)").is_err());
        assert!(check("SELECT range(-1, 100000000)").is_err());
        assert!(check("SELECT generate_series(1, 100000000, 2)").is_err());
    }

    #[test]
    fn nested_calls_multiply() {
        assert!(check("SELECT repeat(repeat('x', 10000), 10000)").is_err());
        assert!(check("SELECT repeat(upper(repeat('x', 10000)), 10000)").is_err());
        assert!(check("SELECT repeat(repeat('x', 100), 100)").is_ok());
    }

    #[test]
    fn small_or_data_dependent_counts_pass() {
        assert!(check("SELECT repeat('x', 10000000)").is_ok());
        assert!(check("SELECT repeat(name, n) FROM t").is_ok());
        assert!(check("SELECT repeat('x', n * 100000000) FROM t").is_ok());
        assert!(check("SELECT range(1, 1000000000, 1000)").is_ok());
        assert!(check("SELECT repeat('x', -5), repeat FROM t").is_ok());
        assert!(check(")) repeat( 1, 2").is_ok());
    }
}
