//! Encoding: column by column, each column downcast once, its values appended to every row.

use super::*;
use arrow::array::{Array, AsArray, BooleanArray, GenericListArray, OffsetSizeTrait, StructArray};
use arrow::buffer::ScalarBuffer;

/// Appends the value of row `i` of `array` to `out[i]`, for every row.
pub(super) fn encode_column(array: &dyn Array, out: &mut [&mut Vec<u8>]) -> StateResult<()> {
    let dt = array.data_type();
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    with_primitive!(dt, encode_fixed, (array, nulls, out), {
        match dt {
            DataType::Null => {
                out.iter_mut().for_each(|o| o.push(NULL));
                Ok(())
            }
            DataType::Float16 => {
                let a = array
                    .as_primitive_opt::<Float16Type>()
                    .ok_or_else(|| mismatch(dt))?;
                let bits = ScalarBuffer::<u16>::new(a.values().inner().clone(), 0, a.len());
                encode_values(&bits, nulls, out);
                Ok(())
            }
            DataType::Boolean => {
                let a = array.as_boolean_opt().ok_or_else(|| mismatch(dt))?;
                for (i, (o, v)) in out.iter_mut().zip(a.values().iter()).enumerate() {
                    if is_valid(nulls, i) {
                        o.extend_from_slice(&[VALID, u8::from(v)]);
                    } else {
                        o.push(NULL);
                    }
                }
                Ok(())
            }
            DataType::Utf8 => {
                let a = array.as_string_opt::<i32>().ok_or_else(|| mismatch(dt))?;
                encode_var(a.iter().map(|v| v.map(str::as_bytes)), out)
            }
            DataType::LargeUtf8 => {
                let a = array.as_string_opt::<i64>().ok_or_else(|| mismatch(dt))?;
                encode_var(a.iter().map(|v| v.map(str::as_bytes)), out)
            }
            DataType::Utf8View => {
                let a = array.as_string_view_opt().ok_or_else(|| mismatch(dt))?;
                encode_var(a.iter().map(|v| v.map(str::as_bytes)), out)
            }
            DataType::Binary => {
                let a = array.as_binary_opt::<i32>().ok_or_else(|| mismatch(dt))?;
                encode_var(a.iter(), out)
            }
            DataType::LargeBinary => {
                let a = array.as_binary_opt::<i64>().ok_or_else(|| mismatch(dt))?;
                encode_var(a.iter(), out)
            }
            DataType::BinaryView => {
                let a = array.as_binary_view_opt().ok_or_else(|| mismatch(dt))?;
                encode_var(a.iter(), out)
            }
            DataType::FixedSizeBinary(_) => {
                let a = array
                    .as_fixed_size_binary_opt()
                    .ok_or_else(|| mismatch(dt))?;
                for (o, v) in out.iter_mut().zip(a.iter()) {
                    match v {
                        Some(v) => {
                            o.push(VALID);
                            o.extend_from_slice(v);
                        }
                        None => o.push(NULL),
                    }
                }
                Ok(())
            }
            DataType::List(_) => {
                encode_list(array.as_list_opt::<i32>().ok_or_else(|| mismatch(dt))?, out)
            }
            DataType::LargeList(_) => {
                encode_list(array.as_list_opt::<i64>().ok_or_else(|| mismatch(dt))?, out)
            }
            DataType::Struct(_) => encode_struct(
                array.as_struct_opt().ok_or_else(|| mismatch(dt))?,
                nulls,
                out,
            ),
            DataType::Dictionary(_, value_type) => {
                let values = arrow::compute::cast(array, value_type)
                    .map_err(|e| row_error(format!("unpacking a dictionary: {e}")))?;
                encode_column(values.as_ref(), out)
            }
            other => Err(unsupported(other)),
        }
    })
}

fn encode_fixed<T: ArrowPrimitiveType>(
    array: &dyn Array,
    nulls: Option<&NullBuffer>,
    out: &mut [&mut Vec<u8>],
) -> StateResult<()>
where
    T::Native: LeBytes,
{
    let a = array
        .as_primitive_opt::<T>()
        .ok_or_else(|| mismatch(array.data_type()))?;
    encode_values(a.values(), nulls, out);
    Ok(())
}

fn encode_values<N: LeBytes>(values: &[N], nulls: Option<&NullBuffer>, out: &mut [&mut Vec<u8>]) {
    for (i, (o, v)) in out.iter_mut().zip(values).enumerate() {
        if is_valid(nulls, i) {
            o.push(VALID);
            v.put_le(o);
        } else {
            o.push(NULL);
        }
    }
}

fn encode_var<'a>(
    values: impl Iterator<Item = Option<&'a [u8]>>,
    out: &mut [&mut Vec<u8>],
) -> StateResult<()> {
    for (o, v) in out.iter_mut().zip(values) {
        match v {
            Some(v) => {
                o.push(VALID);
                push_len(o, v.len(), "value length")?;
                o.extend_from_slice(v);
            }
            None => o.push(NULL),
        }
    }
    Ok(())
}

fn encode_list<O: OffsetSizeTrait>(
    list: &GenericListArray<O>,
    out: &mut [&mut Vec<u8>],
) -> StateResult<()> {
    let offsets = list.value_offsets();
    let (Some(first), Some(last)) = (offsets.first(), offsets.last()) else {
        return Err(mismatch(list.data_type()));
    };
    let (start, end) = (first.as_usize(), last.as_usize());
    if start > end || end > list.values().len() {
        return Err(mismatch(list.data_type()));
    }
    // Only the child range the (possibly sliced) list refers to, one buffer per element.
    let child = list.values().slice(start, end - start);
    let mut elements: Vec<Vec<u8>> = (0..child.len()).map(|_| Vec::new()).collect();
    {
        let mut sinks: Vec<&mut Vec<u8>> = elements.iter_mut().collect();
        encode_column(child.as_ref(), &mut sinks)?;
    }
    let nulls = list.logical_nulls();
    for (i, (o, bounds)) in out.iter_mut().zip(offsets.windows(2)).enumerate() {
        if !is_valid(nulls.as_ref(), i) {
            o.push(NULL);
            continue;
        }
        let (from, to) = (
            bounds[0].as_usize().saturating_sub(start),
            bounds[1].as_usize().saturating_sub(start),
        );
        let items = elements
            .get(from..to)
            .ok_or_else(|| mismatch(list.data_type()))?;
        o.push(VALID);
        push_len(o, items.len(), "list element count")?;
        for item in items {
            o.extend_from_slice(item);
        }
    }
    Ok(())
}

fn encode_struct(
    array: &StructArray,
    nulls: Option<&NullBuffer>,
    out: &mut [&mut Vec<u8>],
) -> StateResult<()> {
    for (i, o) in out.iter_mut().enumerate() {
        o.push(if is_valid(nulls, i) { VALID } else { NULL });
    }
    let Some(nulls) = nulls.filter(|n| n.null_count() > 0) else {
        for field in array.columns() {
            encode_column(field.as_ref(), out)?;
        }
        return Ok(());
    };
    // Null structs carry no field values: encode the fields of the valid rows only.
    let keep = BooleanArray::new(nulls.inner().clone(), None);
    let mut valid: Vec<&mut Vec<u8>> = out
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| nulls.is_valid(*i))
        .map(|(_, o)| &mut **o)
        .collect();
    for field in array.columns() {
        let kept = arrow::compute::filter(field.as_ref(), &keep)
            .map_err(|e| row_error(format!("selecting struct fields: {e}")))?;
        encode_column(kept.as_ref(), &mut valid)?;
    }
    Ok(())
}
