//! Flink's date-time functions that take a format, `TO_TIMESTAMP(string, format)`,
//! `DATE_FORMAT(timestamp, format)`, `UNIX_TIMESTAMP(string[, format])` and
//! `FROM_UNIXTIME(seconds[, format])`, whose formats are Java's (`yyyy-MM-dd HH:mm:ss.SSS`). DataFusion's functions of the same names (`DATE_FORMAT`
//! is its `to_char`) take chrono's (`%Y-%m-%d %H:%M:%S%.3f`): a literal format without `%` is
//! read as Java's and translated, one with `%` is passed on as chrono's, so both kinds of
//! script run.

use arrow::array::{Array, StringArray, new_null_array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};
use std::sync::Arc;

/// `TO_TIMESTAMP`, `DATE_FORMAT`, `UNIX_TIMESTAMP` and `FROM_UNIXTIME` reading Java formats,
/// ready to register.
pub(crate) fn format_functions() -> Vec<Arc<ScalarUDF>> {
    use datafusion::functions::datetime;
    // The session's options reach them through `with_updated_config` when they are registered.
    let config = ConfigOptions::default();
    vec![
        JavaFormat::wrap("to_timestamp", datetime::to_timestamp(&config), Cast::None),
        // DataFusion's `to_char` answers to `date_format` too: the wrapper takes both names, so
        // no session holds the unwrapped one under either.
        JavaFormat::wrap("to_char", datetime::to_char(), Cast::None),
        JavaFormat::wrap(
            "unix_timestamp",
            datetime::to_timestamp_seconds(&config),
            Cast::EpochSeconds,
        ),
        Arc::new(ScalarUDF::new_from_impl(FromUnixtime::new())),
    ]
}

/// Flink's `FROM_UNIXTIME(seconds[, format])`: epoch seconds as text in a Java format
/// (`yyyy-MM-dd HH:mm:ss` when left out), in UTC. It replaces DataFusion's function of that
/// name, which returns a `TIMESTAMP`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FromUnixtime {
    signature: Signature,
}

impl FromUnixtime {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Int64]),
                    TypeSignature::Exact(vec![DataType::Int64, DataType::Utf8]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for FromUnixtime {
    fn name(&self) -> &str {
        "from_unixtime"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        if let Some(Some(ScalarValue::Utf8(Some(f)))) = args.scalar_arguments.get(1) {
            chrono_format(f)?;
        }
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let format = match args.args.get(1) {
            None => "%Y-%m-%d %H:%M:%S".to_owned(),
            Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(f)))) => chrono_format(f)?,
            Some(ColumnarValue::Scalar(ScalarValue::Utf8(None))) => {
                let rows = args.number_rows;
                return Ok(ColumnarValue::Array(new_null_array(&DataType::Utf8, rows)));
            }
            Some(_) => return exec_err!("from_unixtime: the format is a literal string"),
        };
        let [seconds, ..] = args.args.as_slice() else {
            return exec_err!("from_unixtime takes epoch seconds");
        };
        let seconds = seconds.to_array(args.number_rows)?;
        let times = cast(&seconds, &DataType::Timestamp(TimeUnit::Second, None))?;
        let options = FormatOptions::new()
            .with_timestamp_format(Some(&format))
            .with_null("");
        let formatter = ArrayFormatter::try_new(times.as_ref(), &options)?;
        let text: StringArray = (0..times.len())
            .map(|i| {
                times
                    .is_valid(i)
                    .then(|| formatter.value(i).try_to_string())
                    .transpose()
            })
            .collect::<std::result::Result<_, _>>()?;
        Ok(ColumnarValue::Array(Arc::new(text)))
    }
}

/// What is done to the wrapped function's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Cast {
    None,
    /// A timestamp in seconds to its `BIGINT` epoch seconds (`UNIX_TIMESTAMP`).
    EpochSeconds,
}

/// A DataFusion function whose second argument, a format, may be written in Java's pattern
/// letters.
#[derive(Debug)]
struct JavaFormat {
    name: &'static str,
    inner: Arc<ScalarUDF>,
    cast: Cast,
}

impl PartialEq for JavaFormat {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.cast == other.cast && self.inner == other.inner
    }
}

impl Eq for JavaFormat {}

impl std::hash::Hash for JavaFormat {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.cast.hash(state);
    }
}

impl JavaFormat {
    fn wrap(name: &'static str, inner: Arc<ScalarUDF>, cast: Cast) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::new_from_impl(Self { name, inner, cast }))
    }
}

impl ScalarUDFImpl for JavaFormat {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match self.cast {
            Cast::None => self.inner.return_type(arg_types),
            Cast::EpochSeconds => Ok(DataType::Int64),
        }
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs<'_>) -> Result<FieldRef> {
        // A literal format is translated where the call is planned, so a bad one is a compile
        // error.
        if let Some(Some(ScalarValue::Utf8(Some(f)))) = args.scalar_arguments.get(1) {
            chrono_format(f)?;
        }
        let field = self.inner.return_field_from_args(args)?;
        Ok(match self.cast {
            Cast::None => field,
            Cast::EpochSeconds => Arc::new(
                field
                    .as_ref()
                    .clone()
                    .with_name(self.name)
                    .with_data_type(DataType::Int64),
            ),
        })
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let inner = Arc::new(self.inner.inner().with_updated_config(config)?);
        Some(ScalarUDF::new_from_impl(Self {
            name: self.name,
            inner,
            cast: self.cast,
        }))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if let Some(ColumnarValue::Scalar(ScalarValue::Utf8(Some(f)))) = args.args.get(1) {
            let translated = chrono_format(f)?;
            args.args[1] = ColumnarValue::Scalar(ScalarValue::Utf8(Some(translated)));
        } else if matches!(args.args.get(1), Some(ColumnarValue::Array(_))) {
            return exec_err!("{}: the format is a literal string", self.name);
        }
        if self.cast == Cast::EpochSeconds {
            // The wrapped function returns seconds; the field it is asked for is theirs.
            let field = args
                .return_field
                .as_ref()
                .clone()
                .with_data_type(DataType::Timestamp(
                    arrow::datatypes::TimeUnit::Second,
                    None,
                ));
            args.return_field = Arc::new(field);
        }
        let value = self.inner.invoke_with_args(args)?;
        match self.cast {
            Cast::None => Ok(value),
            Cast::EpochSeconds => value.cast_to(&DataType::Int64, None),
        }
    }
}

/// `format` as chrono's: a format with `%` is chrono's already; otherwise it is Java's
/// (`DateTimeFormatter` pattern letters, `'quoted'` literals) and translated.
///
/// # Errors
/// A Java pattern letter chrono has no equivalent of.
pub(crate) fn chrono_format(format: &str) -> Result<String> {
    if format.contains('%') {
        return Ok(format.to_owned());
    }
    let chars: Vec<char> = format.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A quoted literal; '' is a quote.
            let mut j = i + 1;
            if chars.get(j) == Some(&'\'') {
                out.push('\'');
                i = j + 1;
                continue;
            }
            while j < chars.len() {
                if chars[j] == '\'' {
                    if chars.get(j + 1) != Some(&'\'') {
                        break;
                    }
                    // '' inside quotes is a quote.
                    j += 1;
                }
                out.push(chars[j]);
                j += 1;
            }
            i = j + 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            out.push(c);
            i += 1;
            continue;
        }
        let mut n = 1;
        while chars.get(i + n) == Some(&c) {
            n += 1;
        }
        let piece = match (c, n) {
            ('y' | 'u', 2) => "%y".to_owned(),
            ('y' | 'u', _) => "%Y".to_owned(),
            ('M', 1 | 2) => "%m".to_owned(),
            ('M', 3) => "%b".to_owned(),
            ('M', _) => "%B".to_owned(),
            ('d', _) => "%d".to_owned(),
            ('D', _) => "%j".to_owned(),
            ('H', _) => "%H".to_owned(),
            ('h', _) => "%I".to_owned(),
            ('m', _) => "%M".to_owned(),
            ('s', _) => "%S".to_owned(),
            // Fractions of a second: chrono's `%.3f` holds the dot itself.
            ('S', n @ (3 | 6 | 9)) => {
                if out.ends_with('.') {
                    out.pop();
                }
                format!("%.{n}f")
            }
            ('a', _) => "%p".to_owned(),
            ('E', 1..=3) => "%a".to_owned(),
            ('E', _) => "%A".to_owned(),
            ('Z' | 'x', _) => "%z".to_owned(),
            ('X', _) => "%:z".to_owned(),
            _ => {
                return plan_err!(
                    "the date-time format `{format}`: the pattern `{}` is not supported \
                     (letters y M d D H h m s S(3, 6 or 9) a E Z X, and 'quoted' text)",
                    c.to_string().repeat(n)
                );
            }
        };
        out.push_str(&piece);
        i += n;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_patterns_become_chrono_formats() {
        let cases = [
            ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
            ("yyyy-MM-dd HH:mm:ss.SSS", "%Y-%m-%d %H:%M:%S%.3f"),
            ("yyyy-MM-dd'T'HH:mm:ssXXX", "%Y-%m-%dT%H:%M:%S%:z"),
            ("dd/MM/yy hh:mm a", "%d/%m/%y %I:%M %p"),
            ("EEE, d MMM yyyy", "%a, %d %b %Y"),
            ("'at' HH 'o''clock'", "at %H o'clock"),
            ("%Y-%m-%d", "%Y-%m-%d"),
        ];
        for (java, chrono) in cases {
            assert_eq!(chrono_format(java).unwrap(), chrono, "{java}");
        }
    }

    #[test]
    fn an_unknown_letter_is_an_error_naming_it() {
        let err = chrono_format("yyyy-ww").unwrap_err().to_string();
        assert!(err.contains("`ww`"), "{err}");
    }
}
