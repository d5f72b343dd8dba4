//! Numeric columns from text, parsed with arrow's own parsers (`arrow_cast::parse::Parser`, as
//! arrow's CSV and JSON decoders parse them): shared by the plain CSV and the flat JSON
//! decoders.

use arrow::array::{ArrayRef, PrimitiveBuilder};
use arrow::compute::kernels::cast_utils::Parser;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use std::sync::Arc;

/// Whether [`number_column`] parses `data_type`: the integer types, `Float32` and `Float64`.
pub(crate) fn is_number(data_type: &DataType) -> bool {
    data_type.is_integer() || matches!(data_type, DataType::Float32 | DataType::Float64)
}

/// A column of `len` values of the numeric type `data_type`: `value(i)` is `Some(None)` for a
/// null, `Some(Some(text))` for a text to parse, and `None` when row `i` is not the caller's to
/// decode. `None` then, and when a text does not parse or the type is not numeric.
pub(crate) fn number_column<'a>(
    data_type: &DataType,
    len: usize,
    value: impl FnMut(usize) -> Option<Option<&'a str>>,
) -> Option<ArrayRef> {
    match data_type {
        DataType::Int8 => parsed::<Int8Type>(len, value),
        DataType::Int16 => parsed::<Int16Type>(len, value),
        DataType::Int32 => parsed::<Int32Type>(len, value),
        DataType::Int64 => parsed::<Int64Type>(len, value),
        DataType::UInt8 => parsed::<UInt8Type>(len, value),
        DataType::UInt16 => parsed::<UInt16Type>(len, value),
        DataType::UInt32 => parsed::<UInt32Type>(len, value),
        DataType::UInt64 => parsed::<UInt64Type>(len, value),
        DataType::Float32 => parsed::<Float32Type>(len, value),
        DataType::Float64 => parsed::<Float64Type>(len, value),
        _ => None,
    }
}

fn parsed<'a, T: ArrowPrimitiveType + Parser>(
    len: usize,
    mut value: impl FnMut(usize) -> Option<Option<&'a str>>,
) -> Option<ArrayRef> {
    let mut builder = PrimitiveBuilder::<T>::with_capacity(len);
    for i in 0..len {
        match value(i)? {
            None => builder.append_null(),
            Some(text) => builder.append_value(T::parse(text)?),
        }
    }
    Some(Arc::new(builder.finish()))
}
