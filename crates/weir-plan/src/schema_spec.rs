//! Column declarations in job specs (`{name, type, nullable}`) and their Arrow types.

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::sync::Arc;

/// One declared column of a source's schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// Column name.
    pub name: String,
    /// Type name: `int64`, `float64`, `string`, `bool`, `date32`, `timestamp(ms)`,
    /// `timestamp(us, UTC)`, `decimal(10, 2)`, ... or any Arrow type name (`Int64`, `Utf8`).
    #[serde(rename = "type")]
    pub data_type: String,
    /// Whether nulls are allowed (default true).
    #[serde(default = "default_true")]
    pub nullable: bool,
}

fn default_true() -> bool {
    true
}

/// Parses a type name of a [`FieldSpec`]; `Err` carries the accepted names.
pub fn parse_type_name(name: &str) -> Result<DataType, String> {
    let lower = name.trim().to_ascii_lowercase();
    let simple = match lower.as_str() {
        "int8" | "tinyint" => Some(DataType::Int8),
        "int16" | "smallint" => Some(DataType::Int16),
        "int32" | "int" | "integer" => Some(DataType::Int32),
        "int64" | "bigint" | "long" => Some(DataType::Int64),
        "uint8" => Some(DataType::UInt8),
        "uint16" => Some(DataType::UInt16),
        "uint32" => Some(DataType::UInt32),
        "uint64" => Some(DataType::UInt64),
        "float32" | "float" | "real" => Some(DataType::Float32),
        "float64" | "double" => Some(DataType::Float64),
        "string" | "utf8" | "varchar" | "text" => Some(DataType::Utf8),
        "bool" | "boolean" => Some(DataType::Boolean),
        "date" | "date32" => Some(DataType::Date32),
        "binary" | "bytes" => Some(DataType::Binary),
        "timestamp" => Some(DataType::Timestamp(TimeUnit::Millisecond, None)),
        _ => None,
    };
    if let Some(t) = simple {
        return Ok(t);
    }
    if let Some(args) = lower
        .strip_prefix("timestamp(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let mut parts = args.splitn(2, ',').map(str::trim);
        let unit = match parts.next().unwrap_or("") {
            "s" => TimeUnit::Second,
            "ms" => TimeUnit::Millisecond,
            "us" => TimeUnit::Microsecond,
            "ns" => TimeUnit::Nanosecond,
            other => {
                return Err(format!(
                    "unknown timestamp unit `{other}` (use s, ms, us, ns)"
                ));
            }
        };
        // Keep the time zone's original spelling.
        let tz = name
            .find(',')
            .map(|i| name[i + 1..].trim().trim_end_matches(')').trim().to_owned());
        return Ok(DataType::Timestamp(unit, tz.map(Into::into)));
    }
    if let Some(args) = lower
        .strip_prefix("decimal(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let mut parts = args.split(',').map(str::trim);
        let precision = parts.next().and_then(|p| p.parse::<u8>().ok());
        let scale = parts.next().and_then(|s| s.parse::<i8>().ok());
        return match (precision, scale) {
            (Some(p), Some(s)) if (1..=38).contains(&p) => Ok(DataType::Decimal128(p, s)),
            _ => Err(format!(
                "invalid decimal `{name}` (use decimal(precision, scale), precision 1..=38)"
            )),
        };
    }
    DataType::from_str(name.trim()).map_err(|_| {
        format!(
            "unknown type `{name}` (use int8..int64, uint8..uint64, float32, float64, string, bool, \
             date32, binary, timestamp(s|ms|us|ns[, tz]), decimal(p, s), or an Arrow type name)"
        )
    })
}

/// Builds an Arrow schema from declared fields; `Err` is `(index of the field, message)`.
pub fn schema_from_fields(fields: &[FieldSpec]) -> Result<SchemaRef, (usize, String)> {
    let mut out = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        if out
            .iter()
            .any(|existing: &Field| existing.name() == &f.name)
        {
            return Err((i, format!("duplicate column `{}`", f.name)));
        }
        let t = parse_type_name(&f.data_type).map_err(|m| (i, m))?;
        out.push(Field::new(&f.name, t, f.nullable));
    }
    Ok(Arc::new(Schema::new(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_friendly_and_arrow_names() {
        assert_eq!(parse_type_name("bigint"), Ok(DataType::Int64));
        assert_eq!(parse_type_name("Float64"), Ok(DataType::Float64));
        assert_eq!(
            parse_type_name("timestamp(us, UTC)"),
            Ok(DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("UTC".into())
            ))
        );
        assert_eq!(
            parse_type_name("decimal(10, 2)"),
            Ok(DataType::Decimal128(10, 2))
        );
        assert!(
            parse_type_name("int65")
                .unwrap_err()
                .contains("unknown type `int65`")
        );
    }

    #[test]
    fn duplicate_columns_are_refused() {
        let f = |n: &str| FieldSpec {
            name: n.into(),
            data_type: "int64".into(),
            nullable: true,
        };
        let err = schema_from_fields(&[f("a"), f("a")]).unwrap_err();
        assert_eq!(err.0, 1);
    }
}
