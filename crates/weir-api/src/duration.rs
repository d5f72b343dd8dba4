//! Durations in job specs and operator options: `"10s"`, `"500ms"`, `"1m"`, or a number of ms.
//!
//! Event-time lengths (window sizes, out-of-orderness, allowed lateness) are whole milliseconds,
//! like event times. One parser serves every option so `"5s"` means the same everywhere.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A non-negative duration in whole milliseconds.
///
/// Deserializes from an integer (milliseconds) or a string of an integer and a unit: `ms`, `s`,
/// `m`, `h`, `d` (`"10s"`, `"1500ms"`, `"2m"`). Serializes as an integer number of milliseconds,
/// so canonical plans do not depend on how the user spelled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DurationMs(pub u64);

impl DurationMs {
    /// The duration in milliseconds as `i64`, saturating at `i64::MAX`, for event-time math.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    /// Parses `"10s"`, `"500ms"`, `"1m"`, `"2h"`, `"1d"` or a bare integer of milliseconds.
    ///
    /// # Errors
    ///
    /// A message naming the text and the accepted forms when it is not one of them or overflows.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let unit = unit.trim();
        let bad = || {
            format!(
                "invalid duration {text:?}: expected an integer with a unit ms, s, m, h or d \
                 (e.g. \"10s\", \"500ms\")"
            )
        };
        if digits.is_empty() {
            return Err(bad());
        }
        let value: u64 = digits.parse().map_err(|_| bad())?;
        let factor: u64 = match unit {
            "" | "ms" => 1,
            "s" => 1_000,
            "m" | "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        value
            .checked_mul(factor)
            .map(DurationMs)
            .ok_or_else(|| format!("duration {text:?} overflows 64-bit milliseconds"))
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
    fn rejects_bad_text_with_the_text() {
        for bad in ["", "s", "10x", "-5s", "1.5s", "99999999999999999999d"] {
            let err = DurationMs::parse(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let err = serde_json::from_str::<DurationMs>("-3").unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
    }
}
