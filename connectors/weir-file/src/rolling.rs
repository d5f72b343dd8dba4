//! The sink's rolling policy in Flink's terms: sizes written as `"128MB"` (Flink's
//! `MemorySize`: binary units) and the rollover interval of a part file.

use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::time::{Duration, Instant};
use weir_api::DurationMs;

/// How long a part file stays open, and carried small files wait to be merged, when
/// `rollover_interval` is not set: Flink's default of 30 minutes.
pub const DEFAULT_ROLLOVER_INTERVAL: DurationMs = DurationMs(30 * 60 * 1000);

/// Parses a size: a whole number of bytes, or a number and a binary unit (`b`, `kb`/`k`/`kib`,
/// `mb`/`m`/`mib`, `gb`/`g`/`gib`, `tb`/`t`/`tib`; any case, with or without a space), as
/// Flink's `MemorySize` reads `'128MB'`.
///
/// # Errors
/// A message naming the text and the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (amount, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kib" | "kibibytes" | "kilobytes" => 10,
        "m" | "mb" | "mib" | "mebibytes" | "megabytes" => 20,
        "g" | "gb" | "gib" | "gibibytes" | "gigabytes" => 30,
        "t" | "tb" | "tib" | "tebibytes" | "terabytes" => 40,
        _ => {
            return Err(format!(
                "invalid size {text:?}: expected bytes or a number with a unit b, kb, mb, gb or \
                 tb (e.g. \"128MB\")"
            ));
        }
    };
    let amount: u64 = amount
        .parse()
        .map_err(|_| format!("invalid size {text:?}: expected a whole number before the unit"))?;
    amount
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("invalid size {text:?}: it overflows 64 bits"))
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size: bytes or a string like \"128MB\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("a size cannot be negative, got {v}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_size(v).map_err(E::custom)
    }
}

/// Deserializes a size in bytes from a number or a string read by [`parse_size`].
pub(crate) fn de_size<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(SizeVisitor)
}

/// [`de_size`] of an optional field.
pub(crate) fn de_opt_size<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    de_size(deserializer).map(Some)
}

/// Whether a file opened at `opened` has been open `interval` or longer.
pub(crate) fn due(opened: Instant, interval: DurationMs) -> bool {
    opened.elapsed() >= Duration::from_millis(interval.0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_flink_memory_sizes() {
        assert_eq!(parse_size("128MB"), Ok(128 << 20));
        assert_eq!(parse_size("128 mb"), Ok(128 << 20));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("7b"), Ok(7));
        assert!(parse_size("1.5MB").is_err());
        assert!(
            parse_size("12 parsecs")
                .unwrap_err()
                .contains("\"12 parsecs\"")
        );
        assert!(
            parse_size("99999999999tb")
                .unwrap_err()
                .contains("overflows")
        );
        let v: u64 = de_size(&mut serde_json::Deserializer::from_str("\"1 kb\"")).unwrap();
        assert_eq!(v, 1024);
        let v: u64 = de_size(&mut serde_json::Deserializer::from_str("10")).unwrap();
        assert_eq!(v, 10);
    }
}
