//! Decoding: one typed builder per column, fed from every row's cursor.

use super::*;
use arrow::array::builder::{
    BinaryViewBuilder, BooleanBuilder, FixedSizeBinaryBuilder, GenericBinaryBuilder,
    GenericStringBuilder, NullBufferBuilder, StringViewBuilder,
};
use arrow::array::{
    Array, AsArray, GenericListArray, NullArray, OffsetSizeTrait, PrimitiveArray, StructArray,
};
use arrow::buffer::{OffsetBuffer, ScalarBuffer};
use std::sync::Arc;

/// Builds one column from the values of all rows.
pub(super) trait ColumnDecoder {
    /// Reads `n` consecutive values from `cursor`.
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()>;

    /// Appends a null without reading anything (the parent struct is null).
    fn push_null(&mut self);

    /// The array of everything read so far.
    fn finish(&mut self) -> StateResult<ArrayRef>;

    /// Reads one value from each row's cursor, in row order.
    fn read_rows(&mut self, cursors: &mut [&[u8]]) -> StateResult<()> {
        for (i, cursor) in cursors.iter_mut().enumerate() {
            self.read(cursor, 1).map_err(|e| match e {
                StateError::Corrupt { message } => {
                    StateError::corrupt(format!("row {i}: {message}"))
                }
                other => other,
            })?;
        }
        Ok(())
    }
}

fn truncated(what: &str) -> StateError {
    StateError::corrupt(format!("the row ends inside a {what}"))
}

/// Reads a flag byte: `true` for a valid value.
fn read_flag(cursor: &mut &[u8]) -> StateResult<bool> {
    let (&flag, rest) = cursor.split_first().ok_or_else(|| truncated("null flag"))?;
    *cursor = rest;
    match flag {
        NULL => Ok(false),
        VALID => Ok(true),
        other => Err(StateError::corrupt(format!(
            "null flag byte {other:#04x} is neither 0 nor 1"
        ))),
    }
}

fn read_len(cursor: &mut &[u8], what: &str) -> StateResult<usize> {
    u32::read_le(cursor)
        .map(|n| n as usize)
        .ok_or_else(|| truncated(what))
}

fn read_bytes<'a>(cursor: &mut &'a [u8], len: usize, what: &str) -> StateResult<&'a [u8]> {
    if cursor.len() < len {
        return Err(StateError::corrupt(format!(
            "a {what} of {len} bytes is longer than the {} bytes left",
            cursor.len()
        )));
    }
    let (head, tail) = cursor.split_at(len);
    *cursor = tail;
    Ok(head)
}

pub(super) fn decoder_for(dt: &DataType) -> StateResult<Box<dyn ColumnDecoder>> {
    fn fixed<T: ArrowPrimitiveType>(dt: &DataType) -> StateResult<Box<dyn ColumnDecoder>>
    where
        T::Native: LeBytes,
    {
        Ok(Box::new(FixedDecoder::<T> {
            values: Vec::new(),
            nulls: NullBufferBuilder::new(0),
            data_type: dt.clone(),
        }))
    }
    with_primitive!(dt, fixed, (dt), {
        Ok(match dt {
            DataType::Null => Box::new(NullDecoder(0)),
            DataType::Float16 => Box::new(Float16Decoder(FixedDecoder::<UInt16Type> {
                values: Vec::new(),
                nulls: NullBufferBuilder::new(0),
                data_type: DataType::UInt16,
            })),
            DataType::Boolean => Box::new(BoolDecoder(BooleanBuilder::new())),
            DataType::Utf8 => var(GenericStringBuilder::<i32>::new()),
            DataType::LargeUtf8 => var(GenericStringBuilder::<i64>::new()),
            DataType::Utf8View => var(StringViewBuilder::new()),
            DataType::Binary => var(GenericBinaryBuilder::<i32>::new()),
            DataType::LargeBinary => var(GenericBinaryBuilder::<i64>::new()),
            DataType::BinaryView => var(BinaryViewBuilder::new()),
            DataType::FixedSizeBinary(width) => Box::new(FixedBinaryDecoder {
                width: usize::try_from(*width).map_err(|_| unsupported(dt))?,
                builder: FixedSizeBinaryBuilder::new(*width),
            }),
            DataType::List(field) => Box::new(ListDecoder::<i32>::new(field.clone())?),
            DataType::LargeList(field) => Box::new(ListDecoder::<i64>::new(field.clone())?),
            DataType::Struct(fields) => Box::new(StructDecoder {
                children: fields
                    .iter()
                    .map(|f| decoder_for(f.data_type()))
                    .collect::<StateResult<_>>()?,
                fields: fields.clone(),
                nulls: NullBufferBuilder::new(0),
                len: 0,
            }),
            DataType::Dictionary(_, value_type) => Box::new(DictionaryDecoder {
                values: decoder_for(value_type)?,
                data_type: dt.clone(),
            }),
            other => return Err(unsupported(other)),
        })
    })
}

struct FixedDecoder<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    nulls: NullBufferBuilder,
    data_type: DataType,
}

impl<T: ArrowPrimitiveType> ColumnDecoder for FixedDecoder<T>
where
    T::Native: LeBytes,
{
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if read_flag(cursor)? {
                let value = T::Native::read_le(cursor).ok_or_else(|| truncated("value"))?;
                self.values.push(value);
                self.nulls.append_non_null();
            } else {
                self.push_null();
            }
        }
        Ok(())
    }

    fn push_null(&mut self) {
        self.values.push(T::Native::default());
        self.nulls.append_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        if !PrimitiveArray::<T>::is_compatible(&self.data_type) {
            return Err(mismatch(&self.data_type));
        }
        let values = ScalarBuffer::from(std::mem::take(&mut self.values));
        let array = PrimitiveArray::<T>::try_new(values, self.nulls.finish())
            .map_err(|e| StateError::corrupt(e.to_string()))?;
        Ok(Arc::new(array.with_data_type(self.data_type.clone())))
    }
}

/// Decodes the bit patterns as `u16`, then reinterprets the buffer as `f16`.
struct Float16Decoder(FixedDecoder<UInt16Type>);

impl ColumnDecoder for Float16Decoder {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        self.0.read(cursor, n)
    }

    fn push_null(&mut self) {
        self.0.push_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        let bits = self.0.finish()?;
        let bits = bits
            .as_primitive_opt::<UInt16Type>()
            .ok_or_else(|| mismatch(&DataType::UInt16))?;
        let values = ScalarBuffer::<F16>::new(bits.values().inner().clone(), 0, bits.len());
        let array = PrimitiveArray::<Float16Type>::try_new(values, bits.nulls().cloned())
            .map_err(|e| StateError::corrupt(e.to_string()))?;
        Ok(Arc::new(array))
    }
}

struct NullDecoder(usize);

impl ColumnDecoder for NullDecoder {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if read_flag(cursor)? {
                return Err(StateError::corrupt("a value of type Null is marked valid"));
            }
            self.0 += 1;
        }
        Ok(())
    }

    fn push_null(&mut self) {
        self.0 += 1;
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        Ok(Arc::new(NullArray::new(std::mem::take(&mut self.0))))
    }
}

struct BoolDecoder(BooleanBuilder);

impl ColumnDecoder for BoolDecoder {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if !read_flag(cursor)? {
                self.0.append_null();
                continue;
            }
            match u8::read_le(cursor) {
                Some(0) => self.0.append_value(false),
                Some(1) => self.0.append_value(true),
                Some(other) => {
                    return Err(StateError::corrupt(format!(
                        "boolean byte {other:#04x} is neither 0 nor 1"
                    )));
                }
                None => return Err(truncated("boolean")),
            }
        }
        Ok(())
    }

    fn push_null(&mut self) {
        self.0.append_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        Ok(Arc::new(self.0.finish()))
    }
}

/// The builders of the variable-width types.
trait VarBuilder {
    /// The most bytes the builder's offsets can address.
    const MAX_BYTES: usize;
    fn append(&mut self, bytes: &[u8]) -> StateResult<()>;
    fn append_null(&mut self);
    fn finish_array(&mut self) -> ArrayRef;
}

macro_rules! var_builder {
    ($builder:ty, $max:expr, |$b:ident, $bytes:ident| $append:expr) => {
        impl VarBuilder for $builder {
            const MAX_BYTES: usize = $max;
            fn append(&mut self, $bytes: &[u8]) -> StateResult<()> {
                let $b = self;
                $append;
                Ok(())
            }
            fn append_null(&mut self) {
                <$builder>::append_null(self);
            }
            fn finish_array(&mut self) -> ArrayRef {
                Arc::new(self.finish())
            }
        }
    };
}

fn utf8(bytes: &[u8]) -> StateResult<&str> {
    std::str::from_utf8(bytes).map_err(|e| StateError::corrupt(format!("a string value: {e}")))
}

var_builder!(GenericStringBuilder<i32>, i32::MAX as usize, |b, bytes| b
    .append_value(utf8(bytes)?));
var_builder!(GenericStringBuilder<i64>, usize::MAX, |b, bytes| b
    .append_value(utf8(bytes)?));
var_builder!(StringViewBuilder, usize::MAX, |b, bytes| b
    .append_value(utf8(bytes)?));
var_builder!(GenericBinaryBuilder<i32>, i32::MAX as usize, |b, bytes| b
    .append_value(bytes));
var_builder!(GenericBinaryBuilder<i64>, usize::MAX, |b, bytes| b
    .append_value(bytes));
var_builder!(BinaryViewBuilder, usize::MAX, |b, bytes| b
    .append_value(bytes));

fn var<B: VarBuilder + 'static>(builder: B) -> Box<dyn ColumnDecoder> {
    Box::new(VarDecoder { builder, bytes: 0 })
}

struct VarDecoder<B> {
    builder: B,
    /// Bytes appended so far, checked against the builder's offset range.
    bytes: usize,
}

impl<B: VarBuilder> ColumnDecoder for VarDecoder<B> {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if !read_flag(cursor)? {
                self.builder.append_null();
                continue;
            }
            let len = read_len(cursor, "value length")?;
            let bytes = read_bytes(cursor, len, "value")?;
            self.bytes = self.bytes.saturating_add(len);
            if self.bytes > B::MAX_BYTES {
                return Err(row_error(format!(
                    "the decoded column holds more than {} bytes, more than its offsets address",
                    B::MAX_BYTES
                )));
            }
            self.builder.append(bytes)?;
        }
        Ok(())
    }

    fn push_null(&mut self) {
        self.builder.append_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        Ok(self.builder.finish_array())
    }
}

struct FixedBinaryDecoder {
    builder: FixedSizeBinaryBuilder,
    width: usize,
}

impl ColumnDecoder for FixedBinaryDecoder {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if !read_flag(cursor)? {
                self.builder.append_null();
                continue;
            }
            let bytes = read_bytes(cursor, self.width, "fixed-size binary value")?;
            self.builder
                .append_value(bytes)
                .map_err(|e| StateError::corrupt(e.to_string()))?;
        }
        Ok(())
    }

    fn push_null(&mut self) {
        self.builder.append_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        Ok(Arc::new(self.builder.finish()))
    }
}

struct ListDecoder<O: OffsetSizeTrait> {
    field: FieldRef,
    offsets: Vec<O>,
    nulls: NullBufferBuilder,
    child: Box<dyn ColumnDecoder>,
    child_len: usize,
}

impl<O: OffsetSizeTrait> ListDecoder<O> {
    fn new(field: FieldRef) -> StateResult<Self> {
        Ok(Self {
            child: decoder_for(field.data_type())?,
            field,
            offsets: vec![O::usize_as(0)],
            nulls: NullBufferBuilder::new(0),
            child_len: 0,
        })
    }

    fn last_offset(&self) -> O {
        self.offsets.last().copied().unwrap_or(O::usize_as(0))
    }
}

impl<O: OffsetSizeTrait> ColumnDecoder for ListDecoder<O> {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if !read_flag(cursor)? {
                self.push_null();
                continue;
            }
            // Every element takes at least its flag byte, so a corrupt count fails on the
            // bytes it lacks instead of allocating for it.
            let count = read_len(cursor, "list element count")?;
            self.child.read(cursor, count)?;
            self.child_len = self.child_len.saturating_add(count);
            let offset = O::from_usize(self.child_len)
                .ok_or_else(|| row_error("a decoded list column exceeds its offset type"))?;
            self.offsets.push(offset);
            self.nulls.append_non_null();
        }
        Ok(())
    }

    fn push_null(&mut self) {
        let last = self.last_offset();
        self.offsets.push(last);
        self.nulls.append_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        let offsets = std::mem::replace(&mut self.offsets, vec![O::usize_as(0)]);
        self.child_len = 0;
        let values = self.child.finish()?;
        let list = GenericListArray::<O>::try_new(
            self.field.clone(),
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            values,
            self.nulls.finish(),
        )
        .map_err(|e| StateError::corrupt(format!("a decoded list: {e}")))?;
        Ok(Arc::new(list))
    }
}

struct StructDecoder {
    fields: Fields,
    children: Vec<Box<dyn ColumnDecoder>>,
    nulls: NullBufferBuilder,
    len: usize,
}

impl ColumnDecoder for StructDecoder {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        for _ in 0..n {
            if read_flag(cursor)? {
                for child in &mut self.children {
                    child.read(cursor, 1)?;
                }
                self.nulls.append_non_null();
                self.len += 1;
            } else {
                self.push_null();
            }
        }
        Ok(())
    }

    fn push_null(&mut self) {
        for child in &mut self.children {
            child.push_null();
        }
        self.nulls.append_null();
        self.len += 1;
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        let children = self
            .children
            .iter_mut()
            .map(|c| c.finish())
            .collect::<StateResult<Vec<_>>>()?;
        let len = std::mem::take(&mut self.len);
        let array = StructArray::try_new_with_length(
            self.fields.clone(),
            children,
            self.nulls.finish(),
            len,
        )
        .map_err(|e| StateError::corrupt(format!("a decoded struct: {e}")))?;
        Ok(Arc::new(array))
    }
}

struct DictionaryDecoder {
    values: Box<dyn ColumnDecoder>,
    data_type: DataType,
}

impl ColumnDecoder for DictionaryDecoder {
    fn read(&mut self, cursor: &mut &[u8], n: usize) -> StateResult<()> {
        self.values.read(cursor, n)
    }

    fn push_null(&mut self) {
        self.values.push_null();
    }

    fn finish(&mut self) -> StateResult<ArrayRef> {
        let values = self.values.finish()?;
        arrow::compute::cast(&values, &self.data_type)
            .map_err(|e| row_error(format!("building a {} column: {e}", self.data_type)))
    }
}
