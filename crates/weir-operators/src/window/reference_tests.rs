//! Randomized comparison of the window operators with a simple, independent reference: for
//! thousands of random inputs (rows, out-of-order times, nulls, watermarks at random places),
//! the reference enumerates windows by brute force, buckets the accepted rows per
//! (key, window) and aggregates them; the operator must produce the same results and route
//! the same late rows.

use super::tests::{nullable_batch, schema};
use super::*;
use arrow::array::{Array, AsArray};
use arrow::datatypes::{Int64Type, TimestampMillisecondType};
use std::collections::BTreeMap;
use weir_api::{Emitted, EventTimeMs, JobId, OperatorId, Output, SubtaskIndex, Watermark};

/// splitmix64: a tiny deterministic generator, so every case can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

#[derive(Debug, Clone)]
enum Event {
    Row {
        ts: Option<i64>,
        key: &'static str,
        v: Option<i64>,
    },
    Wm(i64),
}

/// (key, start, end) -> (count, sum, max)
type Results = BTreeMap<(String, i64, i64), (i64, Option<i64>, Option<i64>)>;

fn add(acc: &mut (i64, Option<i64>, Option<i64>), v: Option<i64>) {
    acc.0 += 1;
    if let Some(v) = v {
        acc.1 = Some(acc.1.unwrap_or(0) + v);
        acc.2 = Some(acc.2.map_or(v, |m| m.max(v)));
    }
}

/// Windows of `ts` by brute force over candidate starts.
fn reference_windows(kind: WindowKind, ts: i64) -> Vec<(i64, i64)> {
    let (size, slide) = match kind {
        WindowKind::Tumble { size } => (size, size),
        WindowKind::Hop { size, slide } => (size, slide),
        WindowKind::Cumulate { step, max_size } => {
            let base = ts.div_euclid(max_size) * max_size;
            return (1..=max_size / step)
                .map(|k| (base, base + k * step))
                .filter(|(_, end)| ts < *end)
                .collect();
        }
        WindowKind::Session { .. } => unreachable!("sessions have their own reference"),
    };
    let mut out = Vec::new();
    let mut start = (ts - size).div_euclid(slide) * slide - slide;
    while start <= ts {
        if start <= ts && ts < start + size {
            out.push((start, start + size));
        }
        start += slide;
    }
    out
}

/// The reference for tumble/hop/cumulate: rows whose every window had fired are late.
fn reference_time(kind: WindowKind, events: &[Event]) -> (Results, Vec<(Option<i64>, i64)>) {
    let mut wm = i64::MIN;
    let mut results = Results::new();
    let mut late = Vec::new();
    for e in events {
        match e {
            Event::Wm(w) => wm = wm.max(*w),
            Event::Row { ts: None, v, .. } => late.push((None, v.unwrap_or(-1))),
            Event::Row {
                ts: Some(ts),
                key,
                v,
            } => {
                let open: Vec<_> = reference_windows(kind, *ts)
                    .into_iter()
                    .filter(|(_, end)| end - 1 > wm)
                    .collect();
                if open.is_empty() {
                    late.push((Some(*ts), v.unwrap_or(-1)));
                }
                for (s, e) in open {
                    add(results.entry(((*key).to_owned(), s, e)).or_default(), *v);
                }
            }
        }
    }
    (results, late)
}

/// Open sessions per key: (start, end, values of their rows).
type OpenSessions<'a> = BTreeMap<&'a str, Vec<(i64, i64, Vec<Option<i64>>)>>;

/// The reference for sessions: per key a list of open sessions holding their rows' values.
fn reference_sessions(gap: i64, events: &[Event]) -> (Results, Vec<(Option<i64>, i64)>) {
    let mut wm = i64::MIN;
    let mut open: OpenSessions<'_> = BTreeMap::new();
    let mut results = Results::new();
    let mut late = Vec::new();
    let fire = |open: &mut OpenSessions<'_>, wm: i64, results: &mut Results| {
        for (key, sessions) in open.iter_mut() {
            sessions.retain(|(s, e, values)| {
                if e - 1 <= wm {
                    let acc = results.entry(((*key).to_owned(), *s, *e)).or_default();
                    for v in values {
                        add(acc, *v);
                    }
                    false
                } else {
                    true
                }
            });
        }
    };
    for e in events {
        match e {
            Event::Wm(w) => {
                if *w > wm {
                    wm = *w;
                    fire(&mut open, wm, &mut results);
                }
            }
            Event::Row { ts: None, v, .. } => late.push((None, v.unwrap_or(-1))),
            Event::Row {
                ts: Some(ts),
                key,
                v,
            } => {
                let sessions = open.entry(key).or_default();
                let (mut start, mut end, mut values) = (*ts, ts + gap, vec![*v]);
                let (touching, rest): (Vec<_>, Vec<_>) = sessions
                    .drain(..)
                    .partition(|(s, e, _)| *s <= end && start <= *e);
                *sessions = rest;
                if touching.is_empty() && end - 1 <= wm {
                    late.push((Some(*ts), v.unwrap_or(-1)));
                    continue;
                }
                for (s, e, vs) in touching {
                    start = start.min(s);
                    end = end.max(e);
                    values.extend(vs);
                }
                sessions.push((start, end, values));
            }
        }
    }
    // The end of input fires every session.
    fire(&mut open, i64::MAX, &mut results);
    (results, late)
}

fn run_operator(
    window: serde_json::Value,
    events: &[Event],
    cut: usize,
) -> (Results, Vec<(Option<i64>, i64)>) {
    let (results, late, _) =
        run_with_policy(window, serde_json::json!({"policy": "route"}), events, cut);
    (results, late)
}

/// Runs the operator; returns the last result per (key, window), the routed late rows and the
/// dropped-row count. Panics when a result repeats without the update marker or an update
/// comes first.
fn run_with_policy(
    window: serde_json::Value,
    late_options: serde_json::Value,
    events: &[Event],
    cut: usize,
) -> (Results, Vec<(Option<i64>, i64)>, u64) {
    let options: WindowOptions = serde_json::from_value(serde_json::json!({
        "time_column": "ts",
        "window": window,
        "key_by": ["k"],
        "aggregates": [
            {"function": "count", "as": "n"},
            {"function": "sum", "column": "v", "as": "total"},
            {"function": "max", "column": "v", "as": "top"},
        ],
        "late": late_options,
    }))
    .unwrap();
    let cfg = WindowConfig::resolve(&options, &schema(), "options").unwrap();
    let ctx = TaskContext::new(JobId::new("j"), OperatorId::new("w"), SubtaskIndex(0), 1);
    let mut op = PreparedWindow::new(cfg).create(&ctx).unwrap();
    let mut out = Output::new();
    let mut pending: Vec<(Option<i64>, &str, Option<i64>)> = Vec::new();
    let flush = |pending: &mut Vec<(Option<i64>, &str, Option<i64>)>,
                 op: &mut Box<dyn Operator>,
                 out: &mut Output| {
        for piece in pending.chunks(cut) {
            let batch = nullable_batch(piece);
            op.process_batch(0, batch, out).unwrap();
        }
        pending.clear();
    };
    for e in events {
        match e {
            Event::Row { ts, key, v } => pending.push((*ts, key, *v)),
            Event::Wm(w) => {
                flush(&mut pending, &mut op, &mut out);
                op.process_watermark(Watermark(EventTimeMs(*w)), &mut out)
                    .unwrap();
            }
        }
    }
    flush(&mut pending, &mut op, &mut out);
    op.process_watermark(Watermark::END, &mut out).unwrap();

    let mut results = Results::new();
    let mut late = Vec::new();
    for e in out.drain() {
        match e {
            Emitted::Data { port: 0, batch } => {
                let keys = batch.column(0).as_string::<i32>();
                let starts = batch.column(1).as_primitive::<TimestampMillisecondType>();
                let ends = batch.column(2).as_primitive::<TimestampMillisecondType>();
                let n = batch.column(3).as_primitive::<Int64Type>();
                let sum = batch.column(4).as_primitive::<Int64Type>();
                let max = batch.column(5).as_primitive::<Int64Type>();
                let marker = (batch.num_columns() == 7).then(|| batch.column(6).as_boolean());
                for r in 0..batch.num_rows() {
                    let opt = |a: &arrow::array::Int64Array| a.is_valid(r).then(|| a.value(r));
                    let prev = results.insert(
                        (keys.value(r).to_owned(), starts.value(r), ends.value(r)),
                        (n.value(r), opt(sum), opt(max)),
                    );
                    let is_update = marker.is_some_and(|m| m.value(r));
                    assert_eq!(
                        prev.is_some(),
                        is_update,
                        "a repeated result must carry the update marker, a first one must not"
                    );
                }
            }
            Emitted::MarkedData { .. } => {
                panic!("a window emits results, which carry no watermark marks")
            }
            Emitted::Data { batch, .. } => {
                let ts = batch.column(0).as_primitive::<Int64Type>();
                let v = batch.column(2).as_primitive::<Int64Type>();
                for r in 0..batch.num_rows() {
                    late.push((
                        ts.is_valid(r).then(|| ts.value(r)),
                        if v.is_valid(r) { v.value(r) } else { -1 },
                    ));
                }
            }
            Emitted::Watermark(_) | Emitted::SplitWatermark(_) => {}
        }
    }
    let dropped = ctx.dropped_rows.load(std::sync::atomic::Ordering::Relaxed);
    (results, late, dropped)
}

/// The reference of the update policy for tumble/hop/cumulate: a row counts in every window
/// whose lateness deadline has not passed; rows without such a window (and null times) are
/// dropped. The final result of a window covers all rows it accepted.
fn reference_update(kind: WindowKind, lateness: i64, events: &[Event]) -> (Results, u64) {
    let mut wm = i64::MIN;
    let mut results = Results::new();
    let mut dropped = 0;
    for e in events {
        match e {
            Event::Wm(w) => wm = wm.max(*w),
            Event::Row { ts: None, .. } => dropped += 1,
            Event::Row {
                ts: Some(ts),
                key,
                v,
            } => {
                let live: Vec<_> = reference_windows(kind, *ts)
                    .into_iter()
                    .filter(|(_, end)| (end - 1).saturating_add(lateness) > wm)
                    .collect();
                if live.is_empty() {
                    dropped += 1;
                }
                for (s, e) in live {
                    add(results.entry(((*key).to_owned(), s, e)).or_default(), *v);
                }
            }
        }
    }
    (results, dropped)
}

#[test]
fn update_policy_matches_the_reference_on_random_inputs() {
    let mut rng = Rng(0xC0FFEE);
    for case in 0..1_000 {
        let events = random_events(&mut rng);
        let lateness = rng.range(0, 20);
        let size = rng.range(1, 12);
        let (window, kind) = if case % 2 == 0 {
            (
                serde_json::json!({"type": "tumble", "size": size}),
                WindowKind::Tumble { size },
            )
        } else {
            let slide = rng.range(1, 12);
            (
                serde_json::json!({"type": "hop", "size": size, "slide": slide}),
                WindowKind::Hop { size, slide },
            )
        };
        let late = serde_json::json!({"policy": "update", "allowed_lateness": lateness});
        let (want, want_dropped) = reference_update(kind, lateness, &events);
        let (got, _, dropped) = run_with_policy(window.clone(), late, &events, 3);
        assert_eq!(
            got, want,
            "case {case}: {window} lateness {lateness}\n{events:?}"
        );
        assert_eq!(dropped, want_dropped, "case {case}: dropped rows");
    }
}

fn random_events(rng: &mut Rng) -> Vec<Event> {
    const KEYS: [&str; 3] = ["a", "b", "c"];
    let n = rng.range(1, 60);
    let ooo = rng.range(0, 15);
    let mut max = i64::MIN;
    let mut wm = i64::MIN;
    let mut events = Vec::new();
    for _ in 0..n {
        let ts = (rng.range(0, 19) != 0).then(|| rng.range(-40, 40));
        let v = (rng.range(0, 9) != 0).then(|| rng.range(-10, 10));
        let key = KEYS[rng.range(0, 2) as usize];
        events.push(Event::Row { ts, key, v });
        if let Some(ts) = ts {
            max = max.max(ts);
        }
        if max > i64::MIN && rng.range(0, 3) == 0 {
            let candidate = max - ooo - 1;
            if candidate > wm {
                wm = candidate;
                events.push(Event::Wm(wm));
            }
        }
    }
    events
}

#[test]
fn windows_match_a_brute_force_reference_on_random_inputs() {
    let mut rng = Rng(0x5EED);
    for case in 0..2_000 {
        let events = random_events(&mut rng);
        let cut = rng.range(1, 8) as usize;
        let (window, kind) = match case % 4 {
            0 => {
                let size = rng.range(1, 12);
                (
                    serde_json::json!({"type": "tumble", "size": size}),
                    WindowKind::Tumble { size },
                )
            }
            1 => {
                let size = rng.range(1, 12);
                let slide = rng.range(1, 12);
                (
                    serde_json::json!({"type": "hop", "size": size, "slide": slide}),
                    WindowKind::Hop { size, slide },
                )
            }
            2 => {
                let step = rng.range(1, 5);
                let max_size = step * rng.range(1, 4);
                (
                    serde_json::json!({"type": "cumulate", "step": step, "max_size": max_size}),
                    WindowKind::Cumulate { step, max_size },
                )
            }
            _ => {
                let gap = rng.range(1, 12);
                (
                    serde_json::json!({"type": "session", "gap": gap}),
                    WindowKind::Session { gap },
                )
            }
        };
        let (want, mut want_late) = match kind {
            WindowKind::Session { gap } => reference_sessions(gap, &events),
            other => reference_time(other, &events),
        };
        let (got, mut got_late) = run_operator(window.clone(), &events, cut);
        assert_eq!(got, want, "case {case}: {window} cut {cut}\n{events:?}");
        want_late.sort_unstable();
        got_late.sort_unstable();
        assert_eq!(
            got_late, want_late,
            "case {case}: late rows of {window}\n{events:?}"
        );
    }
}
