//! Row codec tests: golden bytes, random round trips, and corrupt or unsupported input.

use super::*;
use arrow::array::{Array, BooleanArray, GenericListArray, NullArray, PrimitiveArray, StructArray};
use arrow::array::{
    ArrayData, BinaryArray, DictionaryArray, FixedSizeBinaryArray, Float64Array, Int32Array,
    Int64Array, LargeBinaryArray, LargeStringArray, ListArray, StringArray, make_array,
};
use arrow::buffer::Buffer;
use arrow::buffer::OffsetBuffer;
use proptest::prelude::*;
use std::sync::Arc;

fn row(columns: Vec<ArrayRef>) -> Vec<u8> {
    let rows = encode_rows(&columns).expect("encode");
    assert_eq!(rows.len(), 1);
    rows.into_iter().next().unwrap_or_default()
}

fn round_trip(columns: &[ArrayRef]) -> Vec<ArrayRef> {
    let rows = encode_rows(columns).expect("encode");
    let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
    let types: Vec<DataType> = columns.iter().map(|c| c.data_type().clone()).collect();
    decode_rows(&types, &refs).expect("decode")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn golden_bytes_pin_the_format() {
    // The module doc's example.
    let doc = row(vec![
        Arc::new(Int32Array::from(vec![5])),
        Arc::new(StringArray::from(vec!["ab"])),
        Arc::new(Float64Array::from(vec![None])),
    ]);
    assert_eq!(
        hex(&doc),
        "01".to_owned() + "0105000000" + "01020000006162" + "00"
    );

    let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), None])]);
    let ts = PrimitiveArray::<TimestampMillisecondType>::from(vec![-2i64]).with_timezone("+02:00");
    let decimal = PrimitiveArray::<Decimal128Type>::from(vec![-123i128])
        .with_precision_and_scale(10, 2)
        .expect("decimal");
    let f16 = PrimitiveArray::<Float16Type>::from(vec![F16::from_f32(1.0)]);
    let interval =
        PrimitiveArray::<IntervalMonthDayNanoType>::from(vec![IntervalMonthDayNano::new(1, -1, 2)]);
    let bytes = row(vec![
        Arc::new(BooleanArray::from(vec![true])),
        Arc::new(Float64Array::from(vec![-0.0])),
        Arc::new(list),
        Arc::new(ts),
        Arc::new(decimal),
        Arc::new(f16),
        Arc::new(interval),
        Arc::new(NullArray::new(1)),
        Arc::new(FixedSizeBinaryArray::try_from_iter([[9u8, 8]].into_iter()).expect("fixed")),
    ]);
    let expected = [
        "01",   // version
        "0101", // true
        "01",   /* -0.0 */
        "0000000000000080",
        "01", /* [1, null] */
        "02000000",
        "01",
        "0100000000000000",
        "00",
        "01", /* -2 ms */
        "feffffffffffffff",
        "01", /* -1.23 */
        "85ffffffffffffffffffffffffffffff",
        "01", /* f16 1.0 */
        "003c",
        "01", /* 1 month, -1 day, 2 ns */
        "01000000",
        "ffffffff",
        "0200000000000000",
        "00", // Null
        "01", /* fixed [9, 8] */
        "0908",
    ]
    .concat();
    assert_eq!(hex(&bytes), expected);
}

#[test]
fn types_units_zones_and_decimal_scale_come_from_the_decode_types() {
    let ts =
        PrimitiveArray::<TimestampMicrosecondType>::from(vec![Some(7), None]).with_timezone("UTC");
    let decimal = PrimitiveArray::<Decimal256Type>::from(vec![Some(i256::from_i128(-5)), None])
        .with_precision_and_scale(50, 3)
        .expect("decimal");
    let columns: Vec<ArrayRef> = vec![Arc::new(ts), Arc::new(decimal)];
    let decoded = round_trip(&columns);
    assert_eq!(decoded[0].data_type(), columns[0].data_type());
    assert_eq!(decoded[1].data_type(), columns[1].data_type());
    assert_eq!(&decoded, &columns);
    // No columns: no rows to count.
    assert!(encode_rows(&[]).expect("encode").is_empty());
    assert!(
        decode_rows(&[], &[&[ROW_CODEC_VERSION]])
            .expect("decode")
            .is_empty()
    );
}

#[test]
fn unsupported_types_and_mismatched_lengths_are_clear_errors() {
    let map_type = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("k", DataType::Utf8, false),
                Field::new("v", DataType::Int32, true),
            ])),
            false,
        )),
        false,
    );
    let fixed_list = DataType::FixedSizeList(Arc::new(Field::new("i", DataType::Int32, true)), 2);
    for dt in [map_type, fixed_list] {
        let err = decode_rows(std::slice::from_ref(&dt), &[]).expect_err("unsupported");
        assert!(
            matches!(err, StateError::UnsupportedRowType { .. }),
            "{err}"
        );
        assert!(err.to_string().contains(&dt.to_string()), "{err}");
        let column = arrow::array::new_null_array(&dt, 1);
        let err = encode_rows(&[column]).expect_err("unsupported");
        assert!(err.to_string().contains(&dt.to_string()), "{err}");
    }
    let err = encode_rows(&[
        Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef,
        Arc::new(Int32Array::from(vec![1])),
    ])
    .expect_err("lengths differ");
    assert!(matches!(err, StateError::RowCodec { .. }), "{err}");
}

fn corrupt(types: &[DataType], bytes: &[u8]) -> String {
    match decode_rows(types, &[bytes]) {
        Err(StateError::Corrupt { message }) => message,
        other => panic!("{bytes:?} as {types:?} decoded to {other:?}"),
    }
}

#[test]
fn corrupt_rows_are_errors_not_panics() {
    let list_type = DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true)));
    let types = [
        DataType::Int64,
        DataType::Utf8,
        list_type.clone(),
        DataType::Boolean,
    ];
    let list = arrow::array::GenericListBuilder::<i32, _>::new(arrow::array::StringBuilder::new());
    let mut list = list;
    list.values().append_value("x");
    list.values().append_null();
    list.append(true);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![3])),
        Arc::new(StringArray::from(vec!["héllo"])),
        Arc::new(list.finish()),
        Arc::new(BooleanArray::from(vec![false])),
    ];
    let good = row(columns);
    for cut in 0..good.len() {
        corrupt(&types, &good[..cut]);
    }
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(corrupt(&types, &trailing).contains("left after"));
    let mut version = good.clone();
    version[0] = 2;
    assert!(corrupt(&types, &version).contains("version 2"));
    let mut flag = good.clone();
    flag[1] = 7;
    assert!(corrupt(&types, &flag).contains("column 0"));
    let mut boolean = good.clone();
    let last = boolean.len() - 1;
    boolean[last] = 2;
    assert!(corrupt(&types, &boolean).contains("boolean"));
    // "héllo": flip a byte of the two-byte 'é' into invalid UTF-8.
    let mut utf8 = good.clone();
    utf8[1 + 9 + 5 + 1] = 0xFF;
    assert!(corrupt(&types, &utf8).contains("column 1"));
    // A huge element count fails on the missing bytes, without allocating for it.
    let huge = [&[1u8, 1][..], &u32::MAX.to_le_bytes(), &[0, 0]].concat();
    corrupt(std::slice::from_ref(&list_type), &huge);
    corrupt(&[DataType::Null], &[1, 1]);
    // A null element in a list whose field is not nullable.
    let strict = DataType::List(Arc::new(Field::new_list_field(DataType::Int32, false)));
    corrupt(&[strict], &[1, 1, 1, 0, 0, 0, 0]);
    assert!(corrupt(&[DataType::Int8], &[]).contains("empty"));
}

/// A small deterministic generator for the random arrays.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn nulls(&mut self, len: usize) -> Option<NullBuffer> {
        if self.below(3) == 0 {
            return None;
        }
        Some(NullBuffer::from_iter((0..len).map(|_| self.below(4) != 0)))
    }

    fn text(&mut self) -> String {
        let len = self.below(20);
        (0..len)
            .map(|_| ['a', 'Z', 'é', '😀', '\0', ' '][self.below(6)])
            .collect()
    }

    fn texts(&mut self, len: usize) -> Vec<Option<String>> {
        (0..len)
            .map(|_| (self.below(4) != 0).then(|| self.text()))
            .collect()
    }
}

/// The types the round-trip test draws from, nested ones included.
fn test_types() -> Vec<DataType> {
    let flat = vec![
        DataType::Null,
        DataType::Boolean,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Date32,
        DataType::Date64,
        DataType::Time32(TimeUnit::Second),
        DataType::Time32(TimeUnit::Millisecond),
        DataType::Time64(TimeUnit::Microsecond),
        DataType::Time64(TimeUnit::Nanosecond),
        DataType::Timestamp(TimeUnit::Second, None),
        DataType::Timestamp(TimeUnit::Millisecond, Some("+02:00".into())),
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        DataType::Timestamp(TimeUnit::Nanosecond, None),
        DataType::Duration(TimeUnit::Second),
        DataType::Duration(TimeUnit::Millisecond),
        DataType::Duration(TimeUnit::Microsecond),
        DataType::Duration(TimeUnit::Nanosecond),
        DataType::Interval(IntervalUnit::YearMonth),
        DataType::Interval(IntervalUnit::DayTime),
        DataType::Interval(IntervalUnit::MonthDayNano),
        DataType::Decimal32(9, 2),
        DataType::Decimal64(18, 3),
        DataType::Decimal128(38, 10),
        DataType::Decimal256(76, 5),
        DataType::Utf8,
        DataType::LargeUtf8,
        DataType::Utf8View,
        DataType::Binary,
        DataType::LargeBinary,
        DataType::BinaryView,
        DataType::FixedSizeBinary(3),
    ];
    let nested = vec![
        DataType::List(Arc::new(Field::new_list_field(DataType::Int64, true))),
        DataType::LargeList(Arc::new(Field::new_list_field(DataType::Utf8, true))),
        DataType::List(Arc::new(Field::new_list_field(
            DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true))),
            true,
        ))),
        DataType::Struct(Fields::from(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
        ])),
        DataType::List(Arc::new(Field::new_list_field(
            DataType::Struct(Fields::from(vec![
                Field::new("x", DataType::Boolean, true),
                Field::new("y", DataType::LargeBinary, true),
            ])),
            true,
        ))),
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        DataType::Struct(Fields::empty()),
    ];
    flat.into_iter().chain(nested).collect()
}

fn random_array(dt: &DataType, len: usize, rng: &mut SplitMix) -> ArrayRef {
    if let Some(width) = dt.primitive_width() {
        // Random bit patterns: NaNs with payloads, -0.0, extreme decimals and intervals.
        let mut bytes = arrow::buffer::MutableBuffer::from_len_zeroed(len * width);
        bytes
            .as_slice_mut()
            .iter_mut()
            .for_each(|b| *b = rng.next() as u8);
        let data = ArrayData::builder(dt.clone())
            .len(len)
            .add_buffer(Buffer::from(bytes))
            .nulls(rng.nulls(len))
            .build()
            .expect("primitive data");
        return make_array(data);
    }
    match dt {
        DataType::Null => Arc::new(NullArray::new(len)),
        DataType::Boolean => Arc::new(BooleanArray::from(
            (0..len)
                .map(|_| [None, Some(true), Some(false)][rng.below(3)])
                .collect::<Vec<_>>(),
        )),
        DataType::Utf8 => Arc::new(StringArray::from(rng.texts(len))),
        DataType::LargeUtf8 => Arc::new(LargeStringArray::from(rng.texts(len))),
        DataType::Utf8View => Arc::new(arrow::array::StringViewArray::from(rng.texts(len))),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let texts = rng.texts(len);
            let bytes: Vec<Option<&[u8]>> = texts
                .iter()
                .map(|t| t.as_deref().map(str::as_bytes))
                .collect();
            match dt {
                DataType::Binary => Arc::new(BinaryArray::from(bytes)),
                DataType::LargeBinary => Arc::new(LargeBinaryArray::from(bytes)),
                _ => Arc::new(arrow::array::BinaryViewArray::from(bytes)),
            }
        }
        DataType::FixedSizeBinary(3) => {
            let values: Vec<Option<[u8; 3]>> = (0..len)
                .map(|_| (rng.below(4) != 0).then(|| [rng.next() as u8, 0, 0xFF]))
                .collect();
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(values.into_iter(), 3)
                    .expect("fixed"),
            )
        }
        DataType::List(field) | DataType::LargeList(field) => {
            let counts: Vec<usize> = (0..len).map(|_| rng.below(4)).collect();
            let child = random_array(field.data_type(), counts.iter().sum(), rng);
            let nulls = rng.nulls(len);
            if matches!(dt, DataType::List(_)) {
                let offsets = OffsetBuffer::<i32>::from_lengths(counts);
                Arc::new(ListArray::try_new(field.clone(), offsets, child, nulls).expect("list"))
            } else {
                let offsets = OffsetBuffer::<i64>::from_lengths(counts);
                Arc::new(
                    GenericListArray::<i64>::try_new(field.clone(), offsets, child, nulls)
                        .expect("large list"),
                )
            }
        }
        DataType::Struct(fields) => {
            let children = fields
                .iter()
                .map(|f| random_array(f.data_type(), len, rng))
                .collect();
            let nulls = rng.nulls(len);
            Arc::new(
                StructArray::try_new_with_length(fields.clone(), children, nulls, len)
                    .expect("struct"),
            )
        }
        DataType::Dictionary(_, _) => {
            let words = ["red", "green", "blue"];
            let values: Vec<Option<&str>> = (0..len)
                .map(|_| (rng.below(4) != 0).then(|| words[rng.below(3)]))
                .collect();
            Arc::new(values.into_iter().collect::<DictionaryArray<Int32Type>>())
        }
        other => panic!("no generator for {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_columns_round_trip(
        picks in proptest::collection::vec(0usize..48, 1..5),
        len in 0usize..24,
        cut in 0usize..4,
        seed in any::<u64>(),
    ) {
        let types = test_types();
        let mut rng = SplitMix(seed);
        let columns: Vec<ArrayRef> = picks
            .iter()
            .map(|p| {
                let dt = &types[p % types.len()];
                // Sliced arrays: offsets into buffers, offsets into list children.
                let whole = random_array(dt, len + cut, &mut rng);
                whole.slice(cut, len)
            })
            .collect();
        let decoded = round_trip(&columns);
        for (got, want) in decoded.iter().zip(&columns) {
            prop_assert_eq!(got.data_type(), want.data_type());
            prop_assert_eq!(got.as_ref(), want.as_ref(), "{}", want.data_type());
        }
        // Rows are independent: decoding a subset gives the same rows.
        let rows = encode_rows(&columns).expect("encode");
        let odd: Vec<&[u8]> = rows.iter().skip(1).step_by(2).map(Vec::as_slice).collect();
        let picked: Vec<DataType> = columns.iter().map(|c| c.data_type().clone()).collect();
        let subset = decode_rows(&picked, &odd).expect("decode subset");
        prop_assert_eq!(subset.first().map(|c| c.len()), Some(odd.len()));
    }

    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        pick in 0usize..48,
    ) {
        let types = test_types();
        let dt = types[pick % types.len()].clone();
        let _ = decode_rows(&[dt.clone(), dt], &[&bytes]);
    }
}

/// Every type `weir_api::supports` accepts as a key (which the key hash routes by and planning
/// checks) is one this codec stores, or a job would pass planning and fail on its first row.
#[test]
fn every_type_the_key_hash_accepts_is_one_the_codec_stores() {
    use arrow::datatypes::{IntervalUnit, TimeUnit};
    let candidates = [
        DataType::Null,
        DataType::Boolean,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Utf8,
        DataType::LargeUtf8,
        DataType::Utf8View,
        DataType::Binary,
        DataType::LargeBinary,
        DataType::BinaryView,
        DataType::FixedSizeBinary(4),
        DataType::Date32,
        DataType::Date64,
        DataType::Timestamp(TimeUnit::Millisecond, None),
        DataType::Timestamp(TimeUnit::Nanosecond, Some("+01:00".into())),
        DataType::Time32(TimeUnit::Second),
        DataType::Time32(TimeUnit::Millisecond),
        DataType::Time64(TimeUnit::Microsecond),
        DataType::Time64(TimeUnit::Nanosecond),
        DataType::Duration(TimeUnit::Second),
        DataType::Interval(IntervalUnit::DayTime),
        DataType::Decimal32(9, 2),
        DataType::Decimal64(18, 2),
        DataType::Decimal128(38, 10),
        DataType::Decimal256(76, 10),
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        DataType::new_list(DataType::Int32, true),
    ];
    let mut accepted = 0;
    for data_type in candidates {
        if !weir_api::supports(&data_type, weir_api::ColumnUse::Key) {
            continue;
        }
        assert!(weir_plan::key_hash::check_key_type("k", &data_type).is_ok());
        accepted += 1;
        let column = arrow::array::new_null_array(&data_type, 2);
        let rows = encode_rows(&[column]).unwrap_or_else(|e| panic!("{data_type}: {e}"));
        let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        let decoded = decode_rows(std::slice::from_ref(&data_type), &refs)
            .unwrap_or_else(|e| panic!("{data_type}: {e}"));
        assert_eq!(decoded[0].data_type(), &data_type);
        assert_eq!(decoded[0].logical_null_count(), 2, "{data_type}");
    }
    assert!(
        accepted >= 30,
        "the hash accepts {accepted} of the candidates"
    );
}
