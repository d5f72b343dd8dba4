//! Durations in job specs, operator options, `SET` and SQL intervals: `"10s"`, `"500ms"`,
//! `"1.5 min"`, or a number of ms.
//!
//! Event-time lengths (window sizes, out-of-orderness, allowed lateness) are whole milliseconds,
//! like event times. One parser serves every option so `"5s"` means the same everywhere.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A non-negative duration in whole milliseconds.
///
/// Deserializes from an integer (milliseconds) or a string of a number and a unit, read by
/// [`DurationMs::parse`] (`"10s"`, `"1500ms"`, `"2m"`, `"1.5 minutes"`). Serializes as an integer number of milliseconds,
/// so canonical plans do not depend on how the user spelled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DurationMs(pub u64);

impl DurationMs {
    /// The duration in milliseconds as `i64`, saturating at `i64::MAX`, for event-time math.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// Parses a duration: a number and a unit, or a bare number of milliseconds.
    ///
    /// Units are `ms`, `s`, `m`, `h`, `d` or their SQL/Flink spellings (`millisecond(s)`,
    /// `sec`, `second(s)`, `min`, `minute(s)`, `hour(s)`, `day(s)`), in any case, with or without
    /// a space (`"10s"`, `"500 ms"`, `"2 MINUTES"`). The amount may have a fraction when the
    /// result is whole milliseconds (`"1.5s"` is 1500 ms, `"0.0005s"` is refused). Job specs,
    /// `SET`, SQL intervals and window functions all read durations with this one parser.
    ///
    /// # Errors
    ///
    /// A message naming the text and the accepted forms when it is not one of them, is not
    /// whole milliseconds or overflows.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (amount, unit) = text.split_at(split);
        Self::parse_amount(amount, unit).map_err(|why| format!("invalid duration {text:?}: {why}"))
    }

    /// Parses an amount and a unit given apart, as in SQL's `INTERVAL '0.5' SECOND`; the rules
    /// are those of [`DurationMs::parse`].
    ///
    /// # Errors
    ///
    /// Why the pair is not a duration (the caller names where it came from).
    pub fn parse_amount(amount: &str, unit: &str) -> Result<Self, String> {
        const FORMS: &str = "expected a number with a unit ms, s, m, h or d (e.g. \"10s\", \
                             \"500ms\", \"1.5 min\")";
        let amount = amount.trim();
        let factor: u128 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "ms" | "msec" | "millisecond" | "milliseconds" => 1,
            "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
            "h" | "hour" | "hours" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            _ => return Err(FORMS.to_owned()),
        };
        let (whole, fraction) = amount.split_once('.').unwrap_or((amount, "0"));
        let digits =
            |d: &str| !d.is_empty() && d.len() <= 30 && d.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || !digits(fraction) {
            return Err(FORMS.to_owned());
        }
        let overflow = || "it overflows 64-bit milliseconds".to_owned();
        let whole: u128 = whole.parse().map_err(|_| overflow())?;
        let mut ms = whole.checked_mul(factor).ok_or_else(overflow)?;
        let fraction = fraction.trim_end_matches('0');
        if !fraction.is_empty() {
            let scale = 10u128
                .checked_pow(u32::try_from(fraction.len()).unwrap_or(u32::MAX))
                .ok_or_else(|| "it is not a whole number of milliseconds".to_owned())?;
            let part = fraction.parse::<u128>().unwrap_or(0) * factor;
            if !part.is_multiple_of(scale) {
                return Err("it is not a whole number of milliseconds".to_owned());
            }
            ms = ms.checked_add(part / scale).ok_or_else(overflow)?;
        }
        u64::try_from(ms).map(DurationMs).map_err(|_| overflow())
    }
}

impl fmt::Display for DurationMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

impl Serialize for DurationMs {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationMs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration: milliseconds or a string like \"10s\" or \"500ms\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurationMs, E> {
                Ok(DurationMs(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurationMs, E> {
                u64::try_from(v)
                    .map(DurationMs)
                    .map_err(|_| E::custom(format!("a duration cannot be negative, got {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationMs, E> {
                DurationMs::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_integers() {
        assert_eq!(DurationMs::parse("10s"), Ok(DurationMs(10_000)));
        assert_eq!(DurationMs::parse("500ms"), Ok(DurationMs(500)));
        assert_eq!(DurationMs::parse("2m"), Ok(DurationMs(120_000)));
        assert_eq!(DurationMs::parse("1h"), Ok(DurationMs(3_600_000)));
        assert_eq!(DurationMs::parse("1d"), Ok(DurationMs(86_400_000)));
        assert_eq!(DurationMs::parse("0"), Ok(DurationMs(0)));
        let v: DurationMs = serde_json::from_str("1500").unwrap();
        assert_eq!(v, DurationMs(1500));
        let v: DurationMs = serde_json::from_str("\"5 s\"").unwrap();
        assert_eq!(v, DurationMs(5000));
        assert_eq!(serde_json::to_string(&DurationMs(5000)).unwrap(), "5000");
    }

    #[test]
    fn parses_sql_spellings_and_whole_millisecond_fractions() {
        assert_eq!(DurationMs::parse("1.5s"), Ok(DurationMs(1500)));
        assert_eq!(DurationMs::parse("0.003 SECOND"), Ok(DurationMs(3)));
        assert_eq!(DurationMs::parse("10 minutes"), Ok(DurationMs(600_000)));
        assert_eq!(DurationMs::parse("2 Hours"), Ok(DurationMs(7_200_000)));
        assert_eq!(DurationMs::parse("1.250 sec"), Ok(DurationMs(1250)));
        assert_eq!(
            DurationMs::parse_amount("5", "SECOND"),
            Ok(DurationMs(5000))
        );
        assert_eq!(
            DurationMs::parse_amount("0.001", "second"),
            Ok(DurationMs(1))
        );
        assert!(DurationMs::parse_amount("1.5", "MILLISECOND").is_err());
        assert!(DurationMs::parse_amount("1", "fortnight").is_err());
    }

    #[test]
    fn rejects_bad_text_with_the_text() {
        for bad in [
            "",
            "s",
            "10x",
            "-5s",
            "1.",
            ".5s",
            "1.0005s",
            "1.5ms",
            "99999999999999999999d",
        ] {
            let err = DurationMs::parse(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let err = serde_json::from_str::<DurationMs>("-3").unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
    }
}
