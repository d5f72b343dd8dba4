//! Tests of `key_hash`.
use super::*;
use arrow::array::{
    BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
    Float64Array, Int32Array, Int64Array, LargeStringArray, ListArray, StringArray,
    StringViewArray, TimestampMillisecondArray, TimestampNanosecondArray, UInt8Array, UInt64Array,
};
use proptest::prelude::*;
use std::sync::Arc;

fn col(array: impl Array + 'static) -> ArrayRef {
    Arc::new(array)
}

fn hashes(columns: &[ArrayRef]) -> Vec<u64> {
    hash_keys(columns).expect("supported key types")
}

// GOLDEN VECTORS (`GOLDEN` below). These values define where keys live in every checkpoint ever written.
// They MUST NEVER CHANGE: a change here means state written by an earlier release would be
// restored into the wrong shard. Add new vectors; never edit these.

/// Prints every golden vector; used once to produce the literals below.
#[test]
#[ignore = "prints the golden vectors; run by hand when adding a new one"]
fn print_golden_vectors() {
    for (name, columns) in golden_inputs() {
        let h = hashes(&columns);
        let s = shard_ids(&columns, 128).expect("supported");
        let h: Vec<String> = h.iter().map(|v| format!("0x{v:016x}")).collect();
        println!("{name}: [{}] {s:?}", h.join(", "));
    }
}

fn golden_inputs() -> Vec<(&'static str, Vec<ArrayRef>)> {
    vec![
        (
            "int64",
            vec![col(Int64Array::from(vec![0, 1, -1, 42, i64::MAX]))],
        ),
        (
            "utf8",
            vec![col(StringArray::from(vec!["", "a", "auction-7"]))],
        ),
        (
            "nulls",
            vec![
                col(Int64Array::from(vec![None])),
                col(StringArray::from(vec![None::<&str>])),
            ],
        ),
        (
            "float64",
            vec![col(Float64Array::from(vec![
                0.0,
                1.5,
                f64::NAN,
                f64::INFINITY,
            ]))],
        ),
        (
            "composite",
            vec![
                col(Int64Array::from(vec![Some(7), Some(7), None])),
                col(StringArray::from(vec![Some("auction-7"), None, Some("x")])),
            ],
        ),
        (
            "timestamp_ms",
            vec![col(TimestampMillisecondArray::from(vec![
                0,
                1_700_000_000_000,
                -1,
            ])
            .with_timezone("UTC"))],
        ),
        ("boolean", vec![col(BooleanArray::from(vec![false, true]))]),
        ("date32", vec![col(Date32Array::from(vec![0, 19_723]))]),
        (
            "decimal128",
            vec![col(Decimal128Array::from(vec![12_345_i128, -1])
                .with_precision_and_scale(10, 2)
                .expect("valid decimal"))],
        ),
        (
            "binary",
            vec![col(BinaryArray::from(vec![&b"\x00\xff"[..]]))],
        ),
    ]
}

#[rustfmt::skip]
const GOLDEN: &[(&str, &[u64], &[u32])] = &[
    ("int64", &[0xef03f80c2f2a1026, 0x7bc759f3a16fd092, 0x0c72a2d6abb7c8ff, 0x44c77c508883ad78, 0x281c3558d29bfe08], &[38, 18, 127, 120, 8]),
    ("utf8", &[0x50ff15a81340970f, 0x1127826d7350fda6, 0x9a42a42190c7327b], &[15, 38, 123]),
    ("nulls", &[0xbd9a9aeda93d6b77], &[119]),
    ("float64", &[0x078e4ab900e95271, 0xe61612a10904c397, 0x280308856b409770, 0x3abb146162aa1197], &[113, 23, 112, 23]),
    ("composite", &[0xd6d3d9561364c004, 0x1fdde34d636fb7be, 0x37fc7edf7095382a], &[4, 62, 42]),
    ("timestamp_ms", &[0x8a850cc149b8b4a3, 0xb03c1195b59ee758, 0xe81247edf817f8b8], &[35, 88, 56]),
    ("boolean", &[0xdd8f621dbf7f57f1, 0x52fc4823a13c997a], &[113, 122]),
    ("date32", &[0x26146667ead44fd9, 0xa223327e37368888], &[89, 8]),
    ("decimal128", &[0xbab9c2b3ca5367b8, 0xc4791f56268e31e6], &[56, 102]),
    ("binary", &[0xba3c8fa04d773d4c], &[76]),
];

#[test]
fn xxh64_itself_is_the_published_function() {
    // Reference values of XXH64 from the xxHash specification's test suite.
    assert_eq!(XxHash64::oneshot(0, b""), 0xef46_db37_51d8_e999);
    assert_eq!(XxHash64::oneshot(1, b""), 0xd5af_ba13_36a3_be4b);
}

#[test]
fn golden_vectors_never_change() {
    let inputs = golden_inputs();
    assert_eq!(inputs.len(), GOLDEN.len());
    for ((name, columns), (golden_name, golden_hashes, golden_shards)) in inputs.iter().zip(GOLDEN)
    {
        assert_eq!(name, golden_name);
        assert_eq!(&hashes(columns), golden_hashes, "hashes of {name}");
        assert_eq!(
            &shard_ids(columns, 128).expect("supported"),
            golden_shards,
            "shards of {name}"
        );
        for (hash, shard) in golden_hashes.iter().zip(golden_shards.iter()) {
            assert_eq!(shard_of(*hash, 128), StateShardId(*shard));
        }
    }
}

#[test]
fn integer_widths_hash_by_value() {
    let int64 = hashes(&[col(Int64Array::from(vec![42, -3]))]);
    assert_eq!(hashes(&[col(Int32Array::from(vec![42, -3]))]), int64);
    assert_eq!(hashes(&[col(UInt8Array::from(vec![42]))]), int64[..1]);
    assert_eq!(hashes(&[col(UInt64Array::from(vec![42]))]), int64[..1]);
    // Above i64::MAX an unsigned value has its own tag, so it cannot meet a negative i64.
    let high = hashes(&[col(UInt64Array::from(vec![u64::MAX]))]);
    assert_ne!(high, hashes(&[col(Int64Array::from(vec![-1]))]));
}

#[test]
fn string_layouts_are_one_key_type() {
    let texts = vec![
        Some(""),
        Some("a"),
        None,
        Some("a string longer than twelve bytes"),
    ];
    let utf8 = hashes(&[col(StringArray::from(texts.clone()))]);
    assert_eq!(hashes(&[col(LargeStringArray::from(texts.clone()))]), utf8);
    assert_eq!(hashes(&[col(StringViewArray::from(texts.clone()))]), utf8);
    let dict: DictionaryArray<Int32Type> = texts.into_iter().collect();
    assert_eq!(hashes(&[col(dict)]), utf8);
    // A string and a binary with the same bytes are different keys.
    assert_ne!(
        hashes(&[col(BinaryArray::from(vec![&b"a"[..]]))]),
        utf8[1..2]
    );
}

#[test]
fn floats_normalize_zero_and_nan() {
    let h = hashes(&[col(Float64Array::from(vec![
        0.0,
        -0.0,
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7FF0_0000_0000_0001),
    ]))]);
    assert_eq!(h[0], h[1]);
    assert_eq!(h[2], h[3]);
    assert_eq!(h[2], h[4]);
    let f32s = hashes(&[col(Float32Array::from(vec![0.0, -0.0, f32::NAN, 1.5]))]);
    assert_eq!(f32s[..3], [h[0], h[1], h[2]]);
    assert_eq!(f32s[3], hashes(&[col(Float64Array::from(vec![1.5]))])[0]);
    // Floats and integers are different keys.
    assert_ne!(
        hashes(&[col(Float64Array::from(vec![42.0]))]),
        hashes(&[col(Int64Array::from(vec![42]))])
    );
}

#[test]
fn null_differs_from_every_value_and_from_other_positions() {
    let h = hashes(&[col(Int64Array::from(vec![None, Some(0)]))]);
    assert_ne!(h[0], h[1]);
    let s = hashes(&[col(StringArray::from(vec![None, Some("")]))]);
    assert_ne!(s[0], s[1]);
    // A null hashes the same whatever the column type.
    assert_eq!(h[0], s[0]);
    // (null, "x") and ("x", null) are different keys.
    let a = hashes(&[
        col(StringArray::from(vec![None, Some("x")])),
        col(StringArray::from(vec![Some("x"), None])),
    ]);
    assert_ne!(a[0], a[1]);
}

#[test]
fn timestamp_ignores_time_zone_but_not_unit() {
    let utc = hashes(&[col(
        TimestampMillisecondArray::from(vec![5]).with_timezone("UTC")
    )]);
    let paris = hashes(&[col(
        TimestampMillisecondArray::from(vec![5]).with_timezone("+01:00")
    )]);
    let naive = hashes(&[col(TimestampMillisecondArray::from(vec![5]))]);
    assert_eq!(utc, paris);
    assert_eq!(utc, naive);
    assert_ne!(utc, hashes(&[col(TimestampNanosecondArray::from(vec![5]))]));
    assert_ne!(utc, hashes(&[col(Int64Array::from(vec![5]))]));
}

#[test]
fn unsupported_types_and_length_mismatch_are_errors() {
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)])]);
    let err = hash_keys(&[col(Int64Array::from(vec![1])), col(list)]).expect_err("list");
    assert!(
        matches!(&err, Error::UnsupportedKeyType { column, .. } if column == "#1"),
        "{err}"
    );
    assert!(check_key_type("tags", &DataType::new_list(DataType::Int32, true)).is_err());
    assert!(check_key_type("id", &DataType::Int64).is_ok());
    assert!(
        check_key_type(
            "d",
            &DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
        )
        .is_ok()
    );

    let err = hash_keys(&[
        col(Int64Array::from(vec![1, 2])),
        col(Int64Array::from(vec![1])),
    ])
    .expect_err("lengths differ");
    assert!(err.to_string().contains("same length"), "{err}");
    assert!(shard_ids(&[col(Int64Array::from(vec![1]))], 0).is_err());
    assert_eq!(hash_keys(&[]).expect("no columns"), Vec::<u64>::new());
}

fn arb_row() -> impl Strategy<Value = (Option<i64>, Option<String>, Option<f64>)> {
    (
        proptest::option::of(any::<i64>()),
        proptest::option::of("[a-z]{0,20}"),
        proptest::option::of(any::<f64>()),
    )
}

fn columns_of(rows: &[(Option<i64>, Option<String>, Option<f64>)]) -> Vec<ArrayRef> {
    vec![
        col(Int64Array::from(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        )),
        col(StringViewArray::from(
            rows.iter().map(|r| r.1.as_deref()).collect::<Vec<_>>(),
        )),
        col(Float64Array::from(
            rows.iter().map(|r| r.2).collect::<Vec<_>>(),
        )),
    ]
}

proptest! {
    #[test]
    fn hash_does_not_depend_on_batch_position(
        rows in proptest::collection::vec(arb_row(), 1..64),
        pick in any::<proptest::sample::Index>(),
    ) {
        let whole = hashes(&columns_of(&rows));
        let at = pick.index(rows.len());
        // The same row alone in its own batch.
        let alone = hashes(&columns_of(&rows[at..=at]));
        prop_assert_eq!(alone[0], whole[at]);
        // The same row as a slice of the big batch (non-zero offsets in the arrays).
        let sliced: Vec<ArrayRef> = columns_of(&rows)
            .iter()
            .map(|c| c.slice(at, rows.len() - at))
            .collect();
        prop_assert_eq!(&hashes(&sliced)[..], &whole[at..]);
    }

    #[test]
    fn column_order_matters(a in any::<i64>(), b in any::<i64>()) {
        prop_assume!(a != b);
        let ab = hashes(&[col(Int64Array::from(vec![a])), col(Int64Array::from(vec![b]))]);
        let ba = hashes(&[col(Int64Array::from(vec![b])), col(Int64Array::from(vec![a]))]);
        prop_assert_ne!(ab, ba);
    }

    #[test]
    fn shards_are_in_range(key in any::<i64>(), count in 1_u32..10_000) {
        let shards = shard_ids(&[col(Int64Array::from(vec![key]))], count)
            .expect("supported");
        prop_assert!(shards[0] < count);
    }
}

#[test]
fn encoding_matches_the_documented_bytes() {
    // An independent restatement of the module doc, so the doc and the code cannot drift.
    let mut int42 = vec![TAG_INT];
    int42.extend_from_slice(&42_i64.to_le_bytes());
    assert_eq!(
        hashes(&[col(Int64Array::from(vec![42]))]),
        [XxHash64::oneshot(0, &int42)]
    );

    let text = XxHash64::oneshot(0, b"\x05auction-7");
    assert_eq!(hashes(&[col(StringArray::from(vec!["auction-7"]))]), [text]);

    let null = XxHash64::oneshot(0, &[0x00]);
    assert_eq!(hashes(&[col(Int64Array::from(vec![None]))]), [null]);

    // Composite: the second column is seeded with the first column's hash.
    let composite = XxHash64::oneshot(XxHash64::oneshot(0, &int42), b"\x05auction-7");
    assert_eq!(
        hashes(&[
            col(Int64Array::from(vec![42])),
            col(StringArray::from(vec!["auction-7"]))
        ]),
        [composite]
    );

    let mut float = vec![TAG_FLOAT];
    float.extend_from_slice(&1.5_f64.to_bits().to_le_bytes());
    assert_eq!(
        hashes(&[col(Float64Array::from(vec![1.5]))]),
        [XxHash64::oneshot(0, &float)]
    );
}

// The register XXH64 of short fixed-width encodings against the general path.

#[test]
fn xxh64_short_is_xxh64_for_every_short_length() {
    fn check<const N: usize>(seed: u64) {
        let mut data = [0_u8; N];
        for (i, byte) in data.iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(0x9D).wrapping_add(0x3B);
        }
        assert_eq!(
            xxh64_short(seed, &data),
            XxHash64::oneshot(seed, &data),
            "length {N}"
        );
    }
    for seed in [0, 1, 0x9E37_79B9_7F4A_7C15, u64::MAX] {
        check::<0>(seed);
        check::<1>(seed);
        check::<2>(seed);
        check::<3>(seed);
        check::<4>(seed);
        check::<5>(seed);
        check::<7>(seed);
        check::<8>(seed);
        check::<9>(seed);
        check::<12>(seed);
        check::<13>(seed);
        check::<16>(seed);
        check::<18>(seed);
        check::<20>(seed);
        check::<24>(seed);
        check::<28>(seed);
        check::<31>(seed);
    }
}

/// Raw 64-bit patterns for the typed columns: random bits plus the edges of every width and the
/// float specials (both zeros, NaNs with other payloads, infinities, the `i64`/`u64` boundary).
fn arb_raw() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => any::<u64>(),
        1 => any::<i8>().prop_map(|v| v as u64),
        1 => prop::sample::select(vec![
            0_u64,
            1,
            u64::MAX,
            i64::MAX as u64,
            1 << 63,
            (-0.0_f64).to_bits(),
            f64::NAN.to_bits(),
            0xFFF8_0000_0000_0001,
            f64::INFINITY.to_bits(),
            u64::from((-0.0_f32).to_bits()),
            u64::from(f32::NAN.to_bits()) | 1,
            0x8000,
            0x7E01,
        ]),
    ]
}

/// The column kinds of the fast-path proptest; the last ones are not on the register path, so
/// multi-column keys also chain through the general path.
const KINDS: usize = 27;

/// A column of kind `kind` built from `raw` (truncated or reinterpreted to the kind's width).
fn typed_column(kind: usize, raw: &[Option<u64>]) -> ArrayRef {
    use arrow::array::{
        Date64Array, Decimal256Array, DurationMillisecondArray, Float16Array, Int8Array,
        Int16Array, Time32SecondArray, Time64NanosecondArray, TimestampMicrosecondArray,
        TimestampSecondArray, UInt16Array, UInt32Array,
    };
    use arrow::datatypes::i256;
    type F16 = <Float16Type as ArrowPrimitiveType>::Native;
    macro_rules! prim {
        ($array:ty, $map:expr) => {
            col(<$array>::from_iter(raw.iter().map(|v| v.map($map))))
        };
    }
    match kind {
        0 => prim!(Int8Array, |v| v as i8),
        1 => prim!(Int16Array, |v| v as i16),
        2 => prim!(Int32Array, |v| v as i32),
        3 => prim!(Int64Array, |v| v as i64),
        4 => prim!(UInt8Array, |v| v as u8),
        5 => prim!(UInt16Array, |v| v as u16),
        6 => prim!(UInt32Array, |v| v as u32),
        7 => prim!(UInt64Array, |v| v),
        8 => prim!(Float16Array, |v| F16::from_bits(v as u16)),
        9 => prim!(Float32Array, |v| f32::from_bits(v as u32)),
        10 => prim!(Float64Array, f64::from_bits),
        11 => prim!(TimestampSecondArray, |v| v as i64),
        12 => col(
            TimestampMillisecondArray::from_iter(raw.iter().map(|v| v.map(|v| v as i64)))
                .with_timezone("Europe/Paris"),
        ),
        13 => prim!(TimestampMicrosecondArray, |v| v as i64),
        14 => prim!(TimestampNanosecondArray, |v| v as i64),
        15 => prim!(Date32Array, |v| v as i32),
        16 => prim!(Date64Array, |v| v as i64),
        17 => prim!(Time32SecondArray, |v| (v % 86_400) as i32),
        18 => prim!(Time64NanosecondArray, |v| v as i64),
        19 => prim!(DurationMillisecondArray, |v| v as i64),
        20 => col(BooleanArray::from_iter(
            raw.iter().map(|v| v.map(|v| v & 1 == 1)),
        )),
        21 => col(Decimal128Array::from_iter(
            raw.iter().map(|v| v.map(|v| i128::from(v as i64) << 3)),
        )
        .with_precision_and_scale(38, 3)
        .expect("valid decimal type")),
        22 => col(Decimal256Array::from_iter(
            raw.iter()
                .map(|v| v.map(|v| i256::from_i128(i128::from(v)))),
        )
        .with_precision_and_scale(76, 2)
        .expect("valid decimal type")),
        23 => col(StringArray::from_iter(
            raw.iter().map(|v| v.map(|v| format!("k{v:x}"))),
        )),
        24 => {
            let values: Vec<Option<String>> = raw
                .iter()
                .map(|v| v.map(|v| format!("d{}", v % 5)))
                .collect();
            col(values
                .iter()
                .map(Option::as_deref)
                .collect::<DictionaryArray<Int32Type>>())
        }
        25 => col(arrow::array::NullArray::new(raw.len())),
        _ => {
            let values = col(Int64Array::from_iter(
                raw.iter().map(|v| v.map(|v| v as i64 % 7)),
            ));
            let keys = Int16Array::from_iter(
                (0..raw.len()).map(|i| if i % 5 == 4 { None } else { Some(i as i16) }),
            );
            col(DictionaryArray::try_new(keys, values).expect("keys index the values"))
        }
    }
}

/// 1 to 3 key columns of random kinds over the same rows, with a sometimes-null, sometimes
/// null-free validity per column, and a slice offset.
/// One generated key column: its kind (see [`typed_column`]) and its raw values.
type RawColumn = (usize, Vec<Option<u64>>);

fn arb_key_columns() -> impl Strategy<Value = (Vec<RawColumn>, usize)> {
    (0_usize..160).prop_flat_map(|rows| {
        // Validity: 0 all null, 1 mixed, 2 no nulls (then the loops take the null-free branch).
        let column = (
            0..KINDS,
            0_u8..3,
            proptest::collection::vec((any::<bool>(), arb_raw()), rows),
        )
            .prop_map(|(kind, validity, values)| {
                let raw = values
                    .into_iter()
                    .map(|(valid, v)| match validity {
                        0 => None,
                        1 => valid.then_some(v),
                        _ => Some(v),
                    })
                    .collect();
                (kind, raw)
            });
        (proptest::collection::vec(column, 1..4), 0..=rows)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fast_path_matches_the_reference_path((columns, offset) in arb_key_columns()) {
        let columns: Vec<ArrayRef> =
            columns.iter().map(|(kind, raw)| typed_column(*kind, raw)).collect();
        let fast = hash_keys(&columns).expect("supported key types");
        let reference = hash_keys_reference(&columns).expect("supported key types");
        prop_assert_eq!(&fast, &reference);
        // Sliced arrays (non-zero offsets in values and validity).
        let sliced: Vec<ArrayRef> =
            columns.iter().map(|c| c.slice(offset, c.len() - offset)).collect();
        prop_assert_eq!(
            hash_keys(&sliced).expect("supported key types"),
            &reference[offset..]
        );
    }

    #[test]
    fn xxh64_tagged8_matches_xxh64(seed in any::<u64>(), tag in any::<u8>(), payload in arb_raw()) {
        prop_assert_eq!(
            xxh64_tagged8(seed, tag, payload),
            XxHash64::oneshot(seed, &tagged8(tag, payload.to_le_bytes()))
        );
    }

    #[test]
    fn xxh64_short_matches_xxh64(seed in any::<u64>(), data in any::<[u8; 18]>()) {
        // The lengths of the fixed-width encodings: null, boolean, 9-byte, decimal128.
        let one: [u8; 1] = [data[0]];
        prop_assert_eq!(xxh64_short(seed, &one), XxHash64::oneshot(seed, &one));
        let two: [u8; 2] = [data[0], data[1]];
        prop_assert_eq!(xxh64_short(seed, &two), XxHash64::oneshot(seed, &two));
        let nine: [u8; 9] = data[..9].try_into().expect("9 bytes");
        prop_assert_eq!(xxh64_short(seed, &nine), XxHash64::oneshot(seed, &nine));
        prop_assert_eq!(xxh64_short(seed, &data), XxHash64::oneshot(seed, &data));
    }
}
