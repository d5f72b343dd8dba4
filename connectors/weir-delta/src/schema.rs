//! The sink's schema as a Delta schema, and the check of an existing table's schema.

use arrow::datatypes::{Field, Schema, SchemaRef, TimeUnit};
use deltalake_core::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake_core::kernel::{DataType, StructType};
use std::sync::Arc;
use weir_api::{Error, Result};

/// The Arrow schema the sink writes for input `schema`: a timestamp without a time zone
/// (Weir's `TIMESTAMP(3)`, whose values count from the Unix epoch in UTC) becomes a UTC
/// microsecond timestamp, Delta's `timestamp`, as the Flink Delta connector writes it. Delta's
/// `timestamp_ntz` would need table features, which older readers lack and which force
/// `NOT NULL` columns into a feature delta-rs cannot write.
pub(crate) fn table_arrow_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            arrow::datatypes::DataType::Timestamp(_, None) => {
                f.as_ref()
                    .clone()
                    .with_data_type(arrow::datatypes::DataType::Timestamp(
                        TimeUnit::Microsecond,
                        Some("UTC".into()),
                    ))
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The Delta schema of a sink's input `schema` (after [`table_arrow_schema`]).
///
/// # Errors
/// [`Error::Config`] at `options_path` naming a column whose type Delta cannot hold.
pub(crate) fn delta_schema(schema: &Schema, options_path: &str) -> Result<StructType> {
    for field in schema.fields() {
        let converted: std::result::Result<DataType, _> = field.data_type().try_into_kernel();
        if let Err(e) = converted {
            return Err(Error::config(
                options_path,
                format!(
                    "column `{}` has type {}, which a Delta table cannot hold: {e}",
                    field.name(),
                    field.data_type()
                ),
            ));
        }
    }
    schema.try_into_kernel().map_err(|e| {
        Error::config(
            options_path,
            format!("the sink's columns are no Delta schema: {e}"),
        )
    })
}

/// Checks that an existing table's schema and partition columns are the sink's: the same
/// column names, in any order, with the same Delta types.
///
/// # Errors
/// [`Error::Config`] at `options_path` naming every column that differs.
pub(crate) fn check_compatible(
    table: &StructType,
    table_partitions: &[String],
    sink: &StructType,
    sink_partitions: &[String],
    (given, options_path): (&str, &str),
) -> Result<()> {
    let mut problems = Vec::new();
    for field in sink.fields() {
        match table.field(field.name()) {
            None => problems.push(format!("`{}` is not a column of the table", field.name())),
            Some(t) if t.data_type() != field.data_type() => problems.push(format!(
                "`{}` is {} in the table but {} in the sink",
                field.name(),
                t.data_type(),
                field.data_type()
            )),
            Some(_) => {}
        }
    }
    for field in table.fields() {
        if sink.field(field.name()).is_none() {
            problems.push(format!(
                "the table's column `{}` is missing from the sink",
                field.name()
            ));
        }
    }
    if !sink_partitions.is_empty() && table_partitions != sink_partitions {
        problems.push(format!(
            "the table is partitioned by ({}), the sink by ({})",
            table_partitions.join(", "),
            sink_partitions.join(", ")
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::config(
        options_path,
        format!(
            "the Delta table at {given} has another schema than the sink: {}",
            problems.join("; ")
        ),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType as ArrowType;

    fn schema(fields: Vec<Field>) -> StructType {
        delta_schema(&Schema::new(fields), "o").unwrap()
    }

    #[test]
    fn differences_name_every_column() {
        let table = schema(vec![
            Field::new("id", ArrowType::Int64, false),
            Field::new("name", ArrowType::Utf8, true),
            Field::new("gone", ArrowType::Utf8, true),
        ]);
        let sink = schema(vec![
            Field::new("id", ArrowType::Utf8, false),
            Field::new("name", ArrowType::Utf8, true),
            Field::new("new", ArrowType::Float64, true),
        ]);
        let err = check_compatible(&table, &[], &sink, &[], ("lake/t", "sinks[0].options"))
            .unwrap_err()
            .to_string();
        for part in [
            "`id` is long in the table but string in the sink",
            "`new` is not a column of the table",
            "the table's column `gone` is missing",
            "lake/t",
        ] {
            assert!(err.contains(part), "{part} in {err}");
        }
        check_compatible(&table, &[], &table, &[], ("t", "o")).unwrap();
        let err = check_compatible(&table, &[], &table, &["name".into()], ("t", "o")).unwrap_err();
        assert!(err.to_string().contains("partitioned by ()"), "{err}");
    }

    #[test]
    fn millisecond_timestamps_are_delta_timestamps() {
        let input = Schema::new(vec![Field::new(
            "ts",
            ArrowType::Timestamp(TimeUnit::Millisecond, None),
            true,
        )]);
        let s = delta_schema(&table_arrow_schema(&input), "o").unwrap();
        assert_eq!(s.field("ts").unwrap().data_type(), &DataType::TIMESTAMP);
        let err = delta_schema(
            &Schema::new(vec![Field::new(
                "t",
                ArrowType::Time64(TimeUnit::Microsecond),
                true,
            )]),
            "sinks[0].options",
        )
        .unwrap_err();
        assert!(err.to_string().contains("column `t`"), "{err}");
    }
}
