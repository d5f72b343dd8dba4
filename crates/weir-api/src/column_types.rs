//! Which Arrow types Weir supports in each use of a column, in one place: as a key (hashed to
//! a state shard and stored in keyed state) and as a column a source may prune by (compared
//! with the constants of a `prune` condition). The key hash, the state's row codec and the
//! pruning conditions all ask here, so a type cannot be a key to one and not to another.

use arrow::datatypes::{DataType, TimeUnit};

/// What a column of some type is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnUse {
    /// A key column: its values are hashed to a state shard and stored in keyed state.
    Key,
    /// A column a `prune` condition compares with a constant.
    Prune,
}

/// Whether Weir supports a column of `data_type` in `column_use`.
///
/// Keys: null, booleans, integers, floating point, text and binary (also views and fixed
/// size), dates, times, timestamps, durations, decimals, and dictionaries of any of these.
/// Pruning: booleans, integers, floating point, text, dates, times, timestamps and decimals.
pub fn supports(data_type: &DataType, column_use: ColumnUse) -> bool {
    let comparable = matches!(
        data_type,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
            | DataType::Decimal32(_, _)
            | DataType::Decimal64(_, _)
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _)
    );
    match column_use {
        ColumnUse::Prune => {
            comparable || matches!(data_type, DataType::Time32(_) | DataType::Time64(_))
        }
        ColumnUse::Key => match data_type {
            DataType::Dictionary(_, value) => supports(value, ColumnUse::Key),
            DataType::Null
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
            | DataType::Duration(_)
            | DataType::Time32(TimeUnit::Second | TimeUnit::Millisecond)
            | DataType::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond) => true,
            other => {
                supports(other, ColumnUse::Prune)
                    && !matches!(other, DataType::Time32(_) | DataType::Time64(_))
            }
        },
    }
}
