#!/usr/bin/env python3
"""The sequential reference of scripts/compare (README.md, "How results are checked").

Computes what each query must give when the bids are read from the first row of the file to
the last, one row at a time, under Weir's event-time rules (docs/event-time.md,
docs/windows.md; the code is crates/weir-runtime/src/event_time/generator.rs for the
watermarks, crates/weir-operators/src/window/time_window.rs and session/mod.rs for the
windows):

- The watermark after a row is `max event time so far - ooo - 1`, where the SQL watermark
  `WATERMARK FOR ts AS ts - INTERVAL 'd'` gives `ooo = d - 1 ms`, so it is `max - d`. Only a row
  that raises the maximum moves it. It is emitted after the first row, and after that only when
  it is at least `interval` (the table's 'watermark.interval', default 200 ms of event time)
  above the last one emitted.
- A row is judged against the last watermark emitted before it (the row that raises the
  maximum is judged before the watermark it causes).
- Tumbling and sliding windows: a row counts in each of its windows [start, end) with
  `end - 1 > watermark` and is late for the others; a row late for all of them is dropped.
  A window's result holds every row that counted in it (it fires when the watermark reaches
  `end - 1`, after which no row can count in it).
- Session windows (gap g, per key): a row's own window is [ts, ts + g). It joins every session
  of its key not fired yet that it touches (bounds inclusive: [s, e) is touched when
  `ts <= e and s <= ts + g`), merging them into one; when it touches none, it is dropped if
  `ts + g - 1 <= watermark` and starts a new session otherwise. A session fires (final,
  removed) when an emitted watermark reaches its `end - 1`; at the end of the input every
  session fires.
- Filter: no event time, every row counts.
- Interval join (crates/weir-operators/src/interval_join/; the bids joined with themselves):
  a row at or behind the watermark before it (`ts <= watermark`) is late on each side it is
  read by, so a self-join drops it twice and it joins nothing. Every other row joins every
  other on-time row of its key whose time is within the bounds: which rows join depends only
  on each side's own rows and watermark, never on how far the other side has been read.
- First-row deduplication (crates/weir-operators/src/dedup.rs): rows at or behind the
  watermark are late and dropped; of the others, each key keeps the row with the smallest
  time. (A key's best row is emitted once the watermark passes it, so a later on-time row,
  being ahead of that watermark, can never be earlier: the result is the minimum.) Weir breaks
  a tie of two rows of a key at one time by their encoded rows; the reference breaks it by
  (auction, price) and says when it had to (the generated data have no such ties among rows
  that are not late).
- Window Top-N after a tumbling aggregation: the tumbling windows as above (COUNT(*),
  SUM(price) per key), then in each window the n rows with the largest SUM, numbered from 1;
  equal sums are ranked by the key ascending, and the reference says how many windows had a
  tie that decided a rank or which rows made the top n.
- Temporal join with a versioned view (crates/weir-operators/src/temporal_join.rs; the view
  is the last row of each key by time among the rows of a filter): every filtered row starts a
  version of its key at its time (docs/sql.md, "Temporal joins"); the join drops a version
  at or behind the watermark before it (late), and a probe row at or behind it (late). Every
  other probe row is joined with the latest counted version of its key at or before its time
  (none: no row, an INNER join): it is joined once the watermark passes its time, when every
  version that counts up to it has come, so the result does not depend on how far either
  side has been read.
- The queries with updating results (a GROUP BY without a window, the last row and Top-N
  without a window, a regular join with a GROUP BY): no row is late (nothing waits for the
  watermark), so the reference is the final table over every row, the table the engine's
  changes leave. Where equal values make the choice of rows up to the engine (the last row of
  a key at one time, the N-th place of a Top-N shared by equal prices), the reference keeps
  the rows smallest in the other columns and also returns every row that could have taken
  such a place (the alternatives), so that the check can accept the engine's choice.

Everything that does not depend on the order of rows is vectorized with numpy; the session
windows are a loop over each key's rows in file order (the keys are independent). Imported by
compare.py; `python3 reference.py --self-test` runs its small tests.
"""

import bisect
import heapq
import re

import numpy as np

I64_MIN = np.iinfo(np.int64).min

# INTERVAL units and duration units (Weir's duration parser accepts these and longer spellings).
_UNIT_MS = {
    "ms": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def duration_ms(text):
    """Milliseconds of a duration: `200`, `200ms`, `1s`, `1.5 min`, `5 SECOND`."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    unit = m.group(2).lower() or "ms"
    if unit not in _UNIT_MS:
        raise ValueError(f"unknown unit in duration {text!r}")
    ms = float(m.group(1)) * _UNIT_MS[unit]
    if ms != int(ms):
        raise ValueError(f"duration {text!r} is not whole milliseconds")
    return int(ms)


def watermark_spec(table_sql):
    """(delay ms, interval ms) of the WATERMARK clause and options of a CREATE TABLE."""
    table_sql = "\n".join(x for x in table_sql.splitlines() if not x.lstrip().startswith("--"))
    m = re.search(
        r"WATERMARK\s+FOR\s+(\w+)\s+AS\s+(\w+)\s*-\s*INTERVAL\s+'([^']+)'\s+(\w+)",
        table_sql, re.IGNORECASE,
    )
    if not m or m.group(1).lower() != m.group(2).lower():
        raise ValueError("no `WATERMARK FOR c AS c - INTERVAL 'n' UNIT` in the table")
    delay = duration_ms(m.group(3) + m.group(4))
    interval = 200
    opt = re.search(r"'(?:scan\.)?watermark\.interval'\s*=\s*'([^']*)'", table_sql, re.IGNORECASE)
    if opt:
        interval = duration_ms(opt.group(1))
    return delay, interval


def emitted_before(times, delay_ms, interval_ms):
    """The watermark last emitted before each row (I64_MIN: none yet), as int64 array, and the
    number of watermarks emitted (the final one at the end of the input not counted)."""
    times = np.asarray(times, dtype=np.int64)
    n = len(times)
    before = np.full(n, I64_MIN, dtype=np.int64)
    if n == 0:
        return before, 0
    ooo = max(delay_ms - 1, 0)
    step = max(interval_ms, 1)
    # The rows that raise the maximum, and the watermark each would give (increasing).
    raises = np.empty(n, dtype=bool)
    raises[0] = True
    raises[1:] = times[1:] > np.maximum.accumulate(times)[:-1]
    rows = np.flatnonzero(raises)
    candidate = times[rows] - ooo - 1
    # Emitted: the first, then each first candidate at least `step` above the last emitted.
    emitted = []
    j = 0
    while j < len(candidate):
        emitted.append(j)
        j = int(np.searchsorted(candidate, candidate[j] + step, side="left"))
    emitted = np.asarray(emitted, dtype=np.int64)
    after = np.full(n, I64_MIN, dtype=np.int64)
    after[rows[emitted]] = candidate[emitted]
    after = np.maximum.accumulate(after)
    before[1:] = after[:-1]
    return before, len(emitted)


def out_of_order(times):
    """How many rows have an event time below the largest one before them."""
    times = np.asarray(times, dtype=np.int64)
    if len(times) < 2:
        return 0
    return int(np.count_nonzero(times[1:] < np.maximum.accumulate(times)[:-1]))


def _group(columns, key_names, value_aggs):
    """Groups rows by the key columns (most significant first): the keys, in order, and per
    output name an aggregate (`count`, or (`sum`|`max`, column)). Exact integer arithmetic."""
    n = len(columns[key_names[0]])
    if n == 0:
        out = {k: np.empty(0, dtype=np.int64) for k in key_names}
        out.update({name: np.empty(0, dtype=np.int64) for name in value_aggs})
        return out
    # One int64 per row when the keys' ranges fit (a stable sort of it is fast on rows that
    # come nearly in order), else a lexicographic sort.
    lows, widths = [], []
    for k in key_names:
        lo, hi = int(columns[k].min()), int(columns[k].max())
        lows.append(lo)
        widths.append(hi - lo + 1)
    if np.prod([float(w) for w in widths]) < 2.0**62:
        composite = np.zeros(n, dtype=np.int64)
        for k, lo, width in zip(key_names, lows, widths):
            composite *= width
            composite += columns[k] - lo
        order = np.argsort(composite, kind="stable")
        composite = composite[order]
        change = np.empty(n, dtype=bool)
        change[0] = True
        np.not_equal(composite[1:], composite[:-1], out=change[1:])
        starts = np.flatnonzero(change)
        group_keys = composite[starts]
        out = {}
        for k, lo, width in reversed(list(zip(key_names, lows, widths))):
            out[k] = group_keys % width + lo
            group_keys //= width
    else:
        order = np.lexsort(tuple(columns[k] for k in reversed(key_names)))
        keys = [columns[k][order] for k in key_names]
        change = np.zeros(n, dtype=bool)
        change[0] = True
        for k in keys:
            change[1:] |= k[1:] != k[:-1]
        starts = np.flatnonzero(change)
        out = {name: k[starts] for name, k in zip(key_names, keys)}
    gathered = {}
    for name, agg in value_aggs.items():
        if agg == "count":
            out[name] = np.diff(starts, append=n).astype(np.int64, copy=False)
        else:
            fn, col = agg
            if col not in gathered:
                gathered[col] = columns[col][order]
            reduce = np.add if fn == "sum" else np.maximum
            out[name] = reduce.reduceat(gathered[col], starts).astype(np.int64, copy=False)
    return out



def _key_time(keys, times, margin=0):
    """One int64 per row ordered as (key, time), with `margin` around the times so that
    `composite +- margin` never reaches into the next or previous key."""
    if len(keys) == 0:
        return np.empty(0, dtype=np.int64)
    t0 = int(times.min()) - margin - 1
    width = int(times.max()) - t0 + margin + 1
    k0 = int(keys.min())
    if (int(keys.max()) - k0 + 1) * float(width) >= 2.0**62:
        raise ValueError("the keys and times do not fit one int64")
    return (keys - k0) * width + (times - t0)


def _expand_runs(lo, hi):
    """Every pair (i, j) with j in [lo[i], hi[i]), as two int64 arrays: i ascending, then j."""
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    i = np.repeat(np.arange(len(lo)), counts)
    firsts = np.cumsum(counts) - counts  # where each i's pairs start in the output
    return i, lo[i] + (np.arange(total) - firsts[i])


def hop(key_name, keys, times, prices, before, size, slide):
    """Tumbling (slide = size) or sliding windows per key with COUNT(*), SUM(price),
    MAX(price): (result columns, rows dropped as late)."""
    times = np.asarray(times, dtype=np.int64)
    n = len(times)
    first = np.floor_divide(times, slide)  # the latest window start (in slides) of each row
    taken = np.zeros(n, dtype=bool)
    parts_key, parts_start, parts_price = [], [], []
    for j in range(-(-size // slide)):
        start = (first - j) * slide
        end = start + size
        counts = (end > times) & (end - 1 > before)
        taken |= counts
        parts_key.append(keys[counts])
        parts_start.append(start[counts])
        parts_price.append(prices[counts])
    cols = {
        key_name: np.concatenate(parts_key),
        "window_start": np.concatenate(parts_start),
        "price": np.concatenate(parts_price),
    }
    out = _group(cols, ["window_start", key_name], {
        "bids": "count", "total": ("sum", "price"), "max_price": ("max", "price"),
    })
    result = {
        key_name: out[key_name],
        "window_start": out["window_start"],
        "window_end": out["window_start"] + size,
        "bids": out["bids"],
        "total": out["total"],
        "max_price": out["max_price"],
    }
    return result, int(n - np.count_nonzero(taken))


def session(key_name, keys, times, prices, before, gap):
    """Session windows per key with COUNT(*), MAX(price): (result columns, rows dropped as
    late). Each key's rows in file order; a key's open sessions in a list by start (they never
    overlap, so it is in end order too)."""
    keys = np.asarray(keys, dtype=np.int64)
    order = np.argsort(keys, kind="stable")  # by key, file order within a key
    k_sorted = keys[order]
    bounds = np.flatnonzero(np.diff(k_sorted)) + 1
    starts = np.concatenate(([0], bounds)).tolist()
    ends = np.concatenate((bounds, [len(keys)])).tolist()
    ts_all = times[order].tolist()
    wm_all = before[order].tolist()
    price_all = prices[order].tolist()
    key_all = k_sorted.tolist()
    out_key, out_start, out_end, out_count, out_max = [], [], [], [], []
    dropped = 0
    for a, b in zip(starts, ends):
        key = key_all[a] if b > a else None
        open_ = []  # [start, end, count, max]
        for ts, wm, price in zip(ts_all[a:b], wm_all[a:b], price_all[a:b]):
            # Fire what the watermark before this row reached (a prefix: in end order).
            fired = 0
            while fired < len(open_) and open_[fired][1] - 1 <= wm:
                s = open_[fired]
                out_key.append(key)
                out_start.append(s[0])
                out_end.append(s[1])
                out_count.append(s[2])
                out_max.append(s[3])
                fired += 1
            if fired:
                del open_[:fired]
            end = ts + gap
            # The sessions it touches: a contiguous run, found from the last one back.
            hi = len(open_)
            while hi > 0 and open_[hi - 1][0] > end:
                hi -= 1
            lo = hi
            while lo > 0 and ts <= open_[lo - 1][1]:
                lo -= 1
            if lo == hi:
                if end - 1 <= wm:
                    dropped += 1
                    continue
                open_.insert(hi, [ts, end, 1, price])
                continue
            merged = open_[lo]
            if hi - lo == 1:
                if ts < merged[0]:
                    merged[0] = ts
                if end > merged[1]:
                    merged[1] = end
                merged[2] += 1
                if price > merged[3]:
                    merged[3] = price
                continue
            run = open_[lo:hi]
            open_[lo:hi] = [[
                min(run[0][0], ts),
                max(run[-1][1], end),
                sum(s[2] for s in run) + 1,
                max(max(s[3] for s in run), price),
            ]]
        for s in open_:  # the end of the input: every session fires
            out_key.append(key)
            out_start.append(s[0])
            out_end.append(s[1])
            out_count.append(s[2])
            out_max.append(s[3])
    as_i64 = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
    result = {
        key_name: as_i64(out_key),
        "window_start": as_i64(out_start),
        "window_end": as_i64(out_end),
        "bids": as_i64(out_count),
        "max_price": as_i64(out_max),
    }
    return result, dropped


def filter_rows(auction, bidder, price, date_time, min_price):
    """`WHERE price > min_price`, projected: every row counts (no event time)."""
    keep = price > min_price
    return {
        "auction": auction[keep],
        "bidder": bidder[keep],
        "price": price[keep],
        "date_time": date_time[keep],
    }, 0


def interval_self_join(key_name, rows, before, lower, upper, lower_inclusive, upper_inclusive):
    """The rows joined with themselves: every pair (a, b) of rows that are not late with equal
    `key_name` and `lower <(=) b.time - a.time <(=) upper` (`<=` where the bound is inclusive).
    rows: dict of int64 arrays in file order (auction, bidder, price, date_time). Result
    columns: the key, then a_<c> and b_<c> for the other columns (`time` for date_time).
    Dropped: every late row twice, once per side (a self-join reads each row on both sides).

    Vectorized: the on-time rows sorted by (key, time) as one int64; each row's partners are a
    contiguous run of that order, found with two binary searches, and the pairs are the runs
    spelled out."""
    times = np.asarray(rows["date_time"], dtype=np.int64)
    on_time = times > before
    late = int(len(times) - np.count_nonzero(on_time))
    keys = np.asarray(rows[key_name], dtype=np.int64)[on_time]
    t = times[on_time]
    others = [c for c in ("auction", "bidder", "price", "date_time") if c != key_name]
    names = {c: ("time" if c == "date_time" else c) for c in others}
    out_names = [key_name] + [f"a_{names[c]}" for c in others] + [f"b_{names[c]}" for c in others]
    if len(t) == 0:
        return {name: np.empty(0, dtype=np.int64) for name in out_names}, 2 * late
    composite = _key_time(keys, t, max(abs(lower), abs(upper)))
    order = np.argsort(composite, kind="stable")
    composite = composite[order]
    lo = np.searchsorted(composite, composite + lower, side="left" if lower_inclusive else "right")
    hi = np.searchsorted(composite, composite + upper, side="right" if upper_inclusive else "left")
    a, b = _expand_runs(lo, hi)  # positions in `order` of each pair's a and b
    a_rows = order[a]
    b_rows = order[b]
    selected = {c: np.asarray(rows[c], dtype=np.int64)[on_time] for c in others}
    result = {key_name: keys[a_rows]}
    for c in others:
        result[f"a_{names[c]}"] = selected[c][a_rows]
    for c in others:
        result[f"b_{names[c]}"] = selected[c][b_rows]
    return result, 2 * late


def dedup_first(key_name, rows, before):
    """`ROW_NUMBER() OVER (PARTITION BY key ORDER BY time) = 1`: per key, the row with the
    smallest time among the rows that are not late. Result columns: the key, then the other
    columns of `rows` (auction, bidder, price, date_time). Dropped: the late rows. A tie (two
    rows of a key at the smallest time) is broken by the other columns in that order (for the
    bidder: auction, then price), the smaller kept; Weir keeps the row whose encoded row sorts
    first, which need not be the same one, so the notes say how many keys had a tie."""
    times = np.asarray(rows["date_time"], dtype=np.int64)
    on_time = np.flatnonzero(times > before)
    late = int(len(times) - len(on_time))
    others = [c for c in ("auction", "bidder", "price", "date_time") if c != key_name]
    tie_breakers = [c for c in others if c != "date_time"]
    cols = {c: np.asarray(rows[c], dtype=np.int64)[on_time] for c in [key_name] + others}
    if len(on_time) == 0:
        return cols, late, []
    # np.lexsort's last key is the primary one: by key, then time, then the tie-breakers and
    # the file position (so that the order is total).
    sort_keys = [on_time] + [cols[c] for c in reversed(tie_breakers)]
    order = np.lexsort(tuple(sort_keys + [cols["date_time"], cols[key_name]]))
    k = cols[key_name][order]
    t = cols["date_time"][order]
    firsts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    # A tie: the row after a key's first has the same key and the same time.
    nxt = firsts + 1
    nxt = nxt[nxt < len(k)]
    tied = int(np.count_nonzero((k[nxt] == k[nxt - 1]) & (t[nxt] == t[nxt - 1])))
    notes = []
    if tied:
        notes.append(f"{tied:,} keys have two rows at their first time: the reference kept the "
                     f"smaller ({', '.join(tie_breakers)}), Weir the smaller encoded row")
    result = {c: cols[c][order][firsts] for c in [key_name] + others}
    return result, late, notes


def window_top_n(key_name, keys, times, prices, before, size, n):
    """Tumbling windows of `size` per key with COUNT(*) and SUM(price) (the rules of `hop`),
    then in each window the `n` keys with the largest SUM, numbered 1.. (`rn`); equal sums
    ranked by the key ascending. Result columns: window_start, window_end, the key, bids,
    total, rn. Dropped: as the tumbling windows drop. The notes count the windows where equal
    sums decided a rank or a place in the top n (where engines may rank differently)."""
    agg, late = hop(key_name, keys, times, prices, before, size, size)
    start, key, total = agg["window_start"], agg[key_name], agg["total"]
    order = np.lexsort((key, -total, start))  # by window, the largest sum first, then the key
    start, key, total = start[order], key[order], total[order]
    bids = agg["bids"][order]
    m = len(start)
    first = np.concatenate(([True], start[1:] != start[:-1])) if m else np.zeros(0, dtype=bool)
    group_start = np.maximum.accumulate(np.where(first, np.arange(m), 0)) if m else first
    rn = np.arange(m) - group_start + 1
    keep = rn <= n
    # Ties that matter: two neighbours in a window's order with the same sum, the first of them
    # ranked n or better (so the tie decides a rank or which row is in the top n).
    same = np.zeros(m, dtype=bool)
    if m > 1:
        same[:-1] = (start[1:] == start[:-1]) & (total[1:] == total[:-1]) & (rn[:-1] <= n)
    tied_windows = len(np.unique(start[same]))
    notes = []
    if tied_windows:
        notes.append(f"{tied_windows:,} windows have equal totals within their top {n} (or at "
                     f"place {n} and {n + 1}): ranked by {key_name} ascending")
    result = {
        "window_start": start[keep],
        "window_end": start[keep] + size,
        key_name: key[keep],
        "bids": bids[keep],
        "total": total[keep],
        "rn": rn[keep].astype(np.int64),
    }
    return result, late, notes



def window_join(key_name, rows, before, size, left, right):
    """Tumbling windows of `size` on two sides, the rows of channel `left` and of channel
    `right` (rows["channel"] codes), joined on the window and `key_name`. A row whose window's
    last millisecond is at or behind the watermark before it (`start + size - 1 <= watermark`)
    is late on each side that reads it: dropped and joined with nothing. Result columns:
    window_start, window_end, the key, then l_<c> and r_<c> for bidder, price and time.

    Vectorized as the interval join: the right side's on-time rows sorted by (key, window);
    each left row's partners are a run of that order found by two binary searches."""
    times = np.asarray(rows["date_time"], dtype=np.int64)
    keys = np.asarray(rows[key_name], dtype=np.int64)
    start = np.floor_divide(times, size) * size
    on_time = start + size - 1 > before
    sides = []
    late = 0
    for code in (left, right):
        reads = np.asarray(rows["channel"]) == code
        late += int(np.count_nonzero(reads & ~on_time))
        sides.append(np.flatnonzero(reads & on_time))
    composite = _key_time(keys, start)
    l_rows, r_rows = sides
    r_order = r_rows[np.argsort(composite[r_rows], kind="stable")]
    r_sorted = composite[r_order]
    lo = np.searchsorted(r_sorted, composite[l_rows], side="left")
    hi = np.searchsorted(r_sorted, composite[l_rows], side="right")
    a, b = _expand_runs(lo, hi)
    li, ri = l_rows[a], r_order[b]
    result = {"window_start": start[li], "window_end": start[li] + size, key_name: keys[li]}
    for prefix, idx in (("l", li), ("r", ri)):
        for c, name in (("bidder", "bidder"), ("price", "price"), ("date_time", "time")):
            result[f"{prefix}_{name}"] = np.asarray(rows[c], dtype=np.int64)[idx]
    return result, late


def over(key_name, rows, before, frame, preceding, late_rule="watermark"):
    """`COUNT(*)`, `SUM(price)`, `MAX(price)` OVER (PARTITION BY key ORDER BY time ...) for every
    row that is not late (`time > watermark` before it; the late rows are dropped). frame
    `rows`: the row and the `preceding` rows before it; `range`: the rows at most `preceding` ms
    older, and every row of the same time (its peers). Every row's frame is every on-time row
    of its key up to it in time order, however they arrived (a row is emitted when the
    watermark passes its time, after which no row of that time or earlier is on time). Rows of
    one key and time are taken in (bidder, price) order in a ROWS frame; Weir takes them by
    their encoded row, so the notes count such ties. Result columns: auction, bidder, price,
    date_time, bids, total, max_price.

    late_rule `flink`: Flink's rows and frames instead (flink_over_kept): the rows Flink keeps,
    each frame within its key's rows since the state was last cleared.

    Vectorized: the kept rows sorted by (partition, time); each row's frame is a run [lo, hi)
    of that order; the sums are differences of a running sum, the maxima a loop over the
    frame's offsets (at most the longest frame)."""
    times = np.asarray(rows["date_time"], dtype=np.int64)
    keys = np.asarray(rows[key_name], dtype=np.int64)
    if late_rule == "watermark":
        keep = np.flatnonzero(times > before)
        part = keys[keep]
    elif late_rule == "flink":
        kept, epoch = flink_over_kept(keys, times, before, frame, preceding)
        keep = np.flatnonzero(kept)
        part = (keys[keep] - keys.min()) * (int(epoch.max()) + 1) + epoch[keep]
    else:
        raise ValueError(f"unknown late rule {late_rule!r}")
    late = int(len(times) - len(keep))
    cols = {c: np.asarray(rows[c], dtype=np.int64)[keep]
            for c in ("auction", "bidder", "price", "date_time")}
    ties = [c for c in ("bidder", "price") if c != key_name]
    order = np.lexsort(tuple(cols[c] for c in reversed(ties)) + (cols["date_time"], part))
    cols = {c: v[order] for c, v in cols.items()}
    k, t, p = part[order], cols["date_time"], cols["price"]
    m = len(k)
    pos = np.arange(m)
    notes = []
    if frame == "rows":
        change = np.concatenate(([True], k[1:] != k[:-1])) if m else np.zeros(0, dtype=bool)
        group_start = np.maximum.accumulate(np.where(change, pos, 0)) if m else pos
        lo, hi = np.maximum(pos - preceding, group_start), pos + 1
        tied = int(np.count_nonzero((k[1:] == k[:-1]) & (t[1:] == t[:-1]))) if m else 0
        if tied:
            notes.append(f"{tied:,} rows share their key and time with the row before them: "
                         "the reference orders them by (bidder, price), Weir by encoded row, "
                         "Flink as they arrive")
    elif frame == "range":
        composite = _key_time(k, t, preceding)
        lo = np.searchsorted(composite, composite - preceding, side="left")
        hi = np.searchsorted(composite, composite, side="right")
    else:
        raise ValueError(f"unknown OVER frame {frame!r}")
    running = np.concatenate(([0], np.cumsum(p)))
    count = hi - lo
    max_price = np.full(m, np.iinfo(np.int64).min, dtype=np.int64)
    for j in range(int(count.max()) if m else 0):
        idx = hi - 1 - j
        inside = idx >= lo
        np.maximum(max_price, np.where(inside, p[np.maximum(idx, 0)], max_price), out=max_price)
    result = dict(cols)
    result.update({"bids": count.astype(np.int64), "total": running[hi] - running[lo],
                   "max_price": max_price})
    return result, late, notes


def flink_over_kept(keys, times, before, frame, preceding):
    """The rows Flink 2.3's event-time OVER with a bounded frame keeps, and the epoch of each
    (how often its key's state had been cleared before it): (bool array, int64 array).

    Flink (RowTimeRowsBoundedPrecedingFunction, RowTimeRangeBoundedPrecedingFunction) does not
    compare a row with the watermark: it keeps a row whose time is above its key's
    `lastTriggeringTs`, the time of the key's last event-time timer that fired (0 before the
    first), and registers a timer at the row's time; a timer fires when the watermark reaches
    it. The RANGE function also registers a cleanup timer at `time + 1.5 * preceding + 1`
    whenever its current one is below `time + preceding + 1`; when the current cleanup timer
    fires it clears the key's state, `lastTriggeringTs` included (so any later row of the key
    is kept, however late), and a superseded cleanup timer that fires counts as a trigger.
    Rows kept after a clear never see the rows before it in their frames (their aggregates
    start from nothing), hence the epochs. Simulated per key in file order with the watermark
    before each row (`before`: every earlier watermark has reached the operator)."""
    keys = np.asarray(keys, dtype=np.int64)
    n = len(keys)
    order = np.argsort(keys, kind="stable")  # by key, file order within a key
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    starts = np.concatenate(([0], bounds)).tolist()
    ends = np.concatenate((bounds, [n])).tolist()
    ts_all = np.asarray(times, dtype=np.int64)[order].tolist()
    wm_all = np.asarray(before, dtype=np.int64)[order].tolist()
    kept = [False] * n
    epochs = [0] * n
    cleans = frame == "range"
    min_clean, clean_at = preceding + 1, int(preceding * 1.5) + 1
    for a, b in zip(starts, ends):
        timers, pending = [], set()
        last, current, epoch = 0, None, 0
        for i in range(a, b):
            ts, wm = ts_all[i], wm_all[i]
            while timers and timers[0] <= wm:
                fired = heapq.heappop(timers)
                pending.discard(fired)
                if current is not None and current <= fired:
                    last, current, epoch = 0, None, epoch + 1  # the state cleared
                else:
                    last = fired
            if ts <= last:
                continue
            kept[i], epochs[i] = True, epoch
            new = [ts]
            if cleans and (current is None or current < ts + min_clean):
                current = ts + clean_at
                new.append(current)
            for timer in new:
                if timer not in pending:
                    pending.add(timer)
                    heapq.heappush(timers, timer)
    out_kept = np.zeros(n, dtype=bool)
    out_epoch = np.zeros(n, dtype=np.int64)
    out_kept[order] = kept
    out_epoch[order] = epochs
    return out_kept, out_epoch


def enrichment(key_name, rows, table, table_key):
    """Every row joined with the row of `table` (a dict of arrays, the bounded dimension) whose
    `table_key` equals its `key_name`; rows without one are left out (an inner join). No row
    is late: the join does not look at time. Result columns: auction, bidder, price, date_time,
    then the table's other columns."""
    ids = np.asarray(table[table_key], dtype=np.int64)
    if len(np.unique(ids)) != len(ids):
        raise ValueError(f"enrichment: the table's {table_key} is not unique")
    order = np.argsort(ids, kind="stable")
    keys = np.asarray(rows[key_name], dtype=np.int64)
    at = np.minimum(np.searchsorted(ids[order], keys), max(len(ids) - 1, 0))
    match = np.flatnonzero(ids[order][at] == keys) if len(ids) else np.zeros(0, dtype=np.int64)
    result = {c: np.asarray(rows[c], dtype=np.int64)[match]
              for c in ("auction", "bidder", "price", "date_time")}
    for c, values in table.items():
        if c != table_key:
            result[c] = np.asarray(values)[order[at[match]]]
    return result, 0


def group_agg(key_name, rows):
    """`SELECT key, COUNT(*) AS bids, SUM(price) AS total, MAX(price) AS top GROUP BY key` over
    every row (a GROUP BY without a window: no row is late). The final table of its changes."""
    out = _group({key_name: np.asarray(rows[key_name], dtype=np.int64),
                  "price": np.asarray(rows["price"], dtype=np.int64)}, [key_name],
                 {"bids": "count", "total": ("sum", "price"), "top": ("max", "price")})
    return {key_name: out[key_name], "bids": out["bids"], "total": out["total"],
            "top": out["top"]}, 0


def top_n(key_name, rows, order_name, n):
    """`ROW_NUMBER() OVER (PARTITION BY key ORDER BY order DESC) <= n` without a window, the row
    number not selected, over every row (no row is late; n = 1 ordered by the time is the last
    row of each key): per key the n rows with the largest `order_name`. Result columns:
    auction, bidder, price, date_time. Equal values are ranked by the other columns ascending
    (bidder, then price or date_time); where they decide which rows take the last places (the
    n-th largest value has more rows than places are left), the engines choose by their own
    rule (Weir the encoded row, Flink the arrival), so those rows are returned too: (result,
    late 0, notes, alternatives), the alternatives every row of a key whose `order_name` is the
    tied n-th value."""
    cols = {c: np.asarray(rows[c], dtype=np.int64) for c in ("auction", "bidder", "price",
                                                               "date_time")}
    keys, values = cols[key_name], cols[order_name]
    ties = [c for c in ("bidder", "price", "date_time") if c not in (key_name, order_name)]
    # np.lexsort's last key is the primary one: by key, the largest value first, then the ties.
    order = np.lexsort(tuple(cols[c] for c in reversed(ties)) + (-values, keys))
    k, v = keys[order], values[order]
    m = len(k)
    pos = np.arange(m)
    change = np.concatenate(([True], k[1:] != k[:-1])) if m else np.zeros(0, dtype=bool)
    group_start = np.maximum.accumulate(np.where(change, pos, 0)) if m else pos
    rank = pos - group_start
    keep = order[rank < n]
    # A tie that decides a place: the first row left out has its key and the value of the
    # last row kept.
    out_first = np.flatnonzero(rank == n)
    tied = out_first[v[out_first] == v[out_first - 1]]
    composite = _key_time(keys, values) if m else keys
    tied_pairs = composite[order[tied]]
    alt = np.flatnonzero(np.isin(composite, tied_pairs))
    notes = []
    if len(tied):
        notes.append(f"{len(tied):,} keys have equal {order_name} values sharing place {n} "
                     f"({len(alt):,} rows could take those places): the reference kept the "
                     f"smallest ({', '.join(ties)}), Weir breaks the tie by encoded row, Flink by "
                     f"arrival (its batch check by its sort); the check accepts any choice "
                     f"among them")
    result = {c: cols[c][keep] for c in ("auction", "bidder", "price", "date_time")}
    alternatives = {c: cols[c][alt] for c in ("auction", "bidder", "price", "date_time")}
    return result, 0, notes, alternatives


def max_join(key_name, rows):
    """Every row joined with `MAX(price) AS top` of its key over every row: the final table of
    a regular join of the bids with `SELECT key, MAX(price) ... GROUP BY key` (no row is late).
    Result columns: auction, bidder, price, date_time, top."""
    keys = np.asarray(rows[key_name], dtype=np.int64)
    price = np.asarray(rows["price"], dtype=np.int64)
    result = {c: np.asarray(rows[c], dtype=np.int64)
              for c in ("auction", "bidder", "price", "date_time")}
    if len(keys) == 0:
        result["top"] = np.empty(0, dtype=np.int64)
        return result, 0
    k0 = int(keys.min())
    top = np.full(int(keys.max()) - k0 + 1, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(top, keys - k0, price)
    result["top"] = top[keys - k0]
    return result, 0


def newest_so_far(keys, times):
    """Whether each row's time is above the time of every earlier row (file order) of its key:
    the rows a last-row deduplication by time (`ROW_NUMBER() ... ORDER BY ts DESC = 1`)
    replaces its key's row with, the versions of a versioned view. Bool array."""
    keys = np.asarray(keys, dtype=np.int64)
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(keys, kind="stable")  # by key, file order within a key
    # (key, time) as one int64: a key's first row is above every row of the keys before it.
    composite = _key_time(keys[order], np.asarray(times, dtype=np.int64)[order])
    newest = np.empty(n, dtype=bool)
    newest[0] = True
    newest[1:] = composite[1:] > np.maximum.accumulate(composite)[:-1]
    out = np.empty(n, dtype=bool)
    out[order] = newest
    return out


def temporal_join(key_name, rows, before, min_price, late_rule="watermark", batch=False):
    """Every row joined with the version of its key at its time of a versioned view, the
    latest row of each key by time among the rows with `price > min_price`
    (`JOIN v FOR SYSTEM_TIME AS OF b.ts ... ON b.key = v.key`, INNER). Result columns: auction,
    bidder, price, date_time, then the version's high_auction, high_price, high_time (its
    auction, price and date_time), for each probe row that is joined.

    Under Weir's rules (docs/sql.md, "Temporal joins"): every filtered row is a version of its
    key at its time; a version at or behind the watermark before it is late, and so is a
    probe row. Late rows are dropped (the late count is both kinds); every other probe row is
    joined with the latest version of its key at or before its time among the versions that
    are not late. late_rule `flink`: Flink's rule instead (flink_temporal_pairs), nothing
    dropped, and a filtered row is a version only when it is newer than every earlier filtered
    row of its key (newest_so_far: Flink's view emits no change for an older one). batch: the rows as one batch without an arrival order (DuckDB's ASOF join, no row
    late): every filtered row is a version.

    Returns (columns, late rows, notes): the notes count the (key, time) pairs of two filtered
    rows, where "the version at a time" is ambiguous (the engines keep either)."""
    cols = {c: np.asarray(rows[c], dtype=np.int64) for c in ("auction", "bidder", "price",
                                                               "date_time")}
    keys, times = cols[key_name], cols["date_time"]
    filtered = cols["price"] > min_price
    versions = filtered.copy()
    flink_versions = filtered.copy()
    if not batch:
        at = np.flatnonzero(filtered)
        flink_versions[at] = newest_so_far(keys[at], times[at])
    notes = []
    f_comp = np.sort(_key_time(keys[filtered], times[filtered]))
    tied = int(np.count_nonzero(f_comp[1:] == f_comp[:-1])) if len(f_comp) else 0
    if tied:
        notes.append(f"{tied:,} times have two rows above {min_price:,} of one {key_name}: the "
                     "version there is ambiguous (Weir keeps the smaller encoded row, Flink the "
                     "later arrival)")
    if late_rule == "flink":
        probe, version = flink_temporal_pairs(keys, times, flink_versions, before)
        late = 0
    elif late_rule == "watermark":
        on_time = times > before
        counted = np.flatnonzero(versions & on_time)
        late = int(len(times) - np.count_nonzero(on_time)
                   + np.count_nonzero(versions) - len(counted))
        probe = np.flatnonzero(on_time)
        version = _as_of(keys, times, probe, counted)
        probe, version = probe[version >= 0], version[version >= 0]
    else:
        raise ValueError(f"unknown late rule {late_rule!r}")
    result = {c: v[probe] for c, v in cols.items()}
    for c, name in (("auction", "high_auction"), ("price", "high_price"),
                    ("date_time", "high_time")):
        result[name] = cols[c][version]
    return result, late, notes


def _as_of(keys, times, probe, versions):
    """For each row in `probe` (row indices), the row in `versions` of its key with the largest
    time at or before its time, -1 where there is none (int64 array)."""
    if len(probe) == 0 or len(versions) == 0:
        return np.full(len(probe), -1, dtype=np.int64)
    composite = _key_time(keys, times)
    v_order = versions[np.argsort(composite[versions], kind="stable")]
    at = np.searchsorted(composite[v_order], composite[probe], side="right") - 1
    found = v_order[np.maximum(at, 0)]
    return np.where((at >= 0) & (keys[found] == keys[probe]), found, -1)


def flink_temporal_pairs(keys, times, versions, before):
    """The (probe row, version row) pairs Flink 2.3's event-time temporal join
    (TemporalRowTimeJoinOperator, INNER) emits, the rows read in file order with the watermark
    `before` each row: two int64 arrays of row indices.

    Flink drops no row as late. Per key it keeps the probe rows in state and one timer, at the
    smallest time registered (each probe row and each version registers its time; a timer at
    or behind the watermark fires on the next advance). When the timer fires at watermark W it
    emits every probe row at or before W, each joined with the latest version it holds at or
    before the row's time, then removes the versions before the latest one at or before W
    (when none is after W, all but the last), and registers a timer at the smallest time of the
    probe rows left. A version (here every row of `versions`: the deduplication emits only
    rows newer than their key's) is added whenever it comes. So a late probe row is joined with
    its version when its key still holds it, and a late version counts for every probe row
    emitted after it comes. Simulated per key in file order, both inputs of the join in step
    (a row reaches the join on both sides before the watermark it raises); the end of the input
    is a last watermark at +infinity. Flink's inputs are not in step (the versions come later,
    through the deduplication), so where late rows are concerned its result depends on timing
    (compare.py's late_differences)."""
    keys = np.asarray(keys, dtype=np.int64)
    times = np.asarray(times, dtype=np.int64)
    before = np.asarray(before, dtype=np.int64)
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # The watermark after each row (the one before the next; +infinity after the last): a timer
    # at T registered at row i fires after the first row j >= i whose watermark reaches
    # max(T, the watermark before i + 1).
    after = np.append(before[1:], np.iinfo(np.int64).max)
    own = np.searchsorted(after, np.maximum(times, before + 1), side="left")
    reach = np.searchsorted(after, times, side="left")
    order = np.argsort(keys, kind="stable")  # by key, file order within a key
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    out_probe, out_version = [], []
    for part in np.split(order, bounds):
        pos_of, ts_of = part.tolist(), times[part].tolist()
        is_version = versions[part].tolist()
        own_of, reach_of = own[part].tolist(), reach[part].tolist()
        waiting = []  # (time, row, the row after which a timer at its time fires)
        v_times, v_rows = [], []  # the versions held, ascending in time
        timer = fire = None
        for x, pos in enumerate(pos_of):
            while fire is not None and fire < pos:
                w = int(after[fire])
                left = []
                for t, row, r in waiting:
                    if t > w:
                        left.append((t, row, r))
                        continue
                    at = bisect.bisect_right(v_times, t) - 1
                    if at >= 0:
                        out_probe.append(row)
                        out_version.append(v_rows[at])
                first_after = bisect.bisect_right(v_times, w)
                keep = len(v_times) - 1 if first_after == len(v_times) else first_after - 1
                if keep > 0:
                    del v_times[:keep], v_rows[:keep]
                waiting = left
                if left:
                    timer, _, fire = min(left)
                else:
                    timer = fire = None
            t = ts_of[x]
            if is_version[x]:
                v_times.append(t)
                v_rows.append(pos)
            waiting.append((t, pos, reach_of[x]))
            if timer is None or timer > t:
                timer, fire = t, own_of[x]
        # The last watermark (+infinity) fires what is left.
        for t, row, _ in waiting:
            at = bisect.bisect_right(v_times, t) - 1
            if at >= 0:
                out_probe.append(row)
                out_version.append(v_rows[at])
    return np.asarray(out_probe, dtype=np.int64), np.asarray(out_version, dtype=np.int64)


def compute(spec, rows, before, tables=None):
    """The result of one query spec (compare.py's REFERENCE) over rows (dict of int64 arrays
    in file order) with the emitted watermarks `before`: (columns, rows dropped as late,
    notes), the notes a list of remarks worth showing (ties the reference had to break); for
    `top_n` a fourth item, the alternatives (top_n's docstring). spec["batch"]: the rows as
    one batch without an arrival order (the comparison with DuckDB; only `temporal_join`'s
    versions depend on the order).
    tables: the bounded tables by name (dicts of arrays), for the joins with one."""
    kind = spec["kind"]
    if kind == "hop":
        return hop(spec["key"], rows[spec["key"]], rows["date_time"], rows["price"], before,
                   spec["size"], spec["slide"]) + ([],)
    if kind == "session":
        return session(spec["key"], rows[spec["key"]], rows["date_time"], rows["price"], before,
                       spec["gap"]) + ([],)
    if kind == "filter":
        return filter_rows(rows["auction"], rows["bidder"], rows["price"], rows["date_time"],
                           spec["min_price"]) + ([],)
    if kind == "interval_join":
        return interval_self_join(spec["key"], rows, before, spec["lower"], spec["upper"],
                                  spec["lower_inclusive"], spec["upper_inclusive"]) + ([],)
    if kind == "dedup":
        return dedup_first(spec["key"], rows, before)
    if kind == "window_top_n":
        return window_top_n(spec["key"], rows[spec["key"]], rows["date_time"], rows["price"],
                            before, spec["size"], spec["n"])
    if kind == "window_join":
        return window_join(spec["key"], rows, before, spec["size"], spec["left"],
                           spec["right"]) + ([],)
    if kind == "over":
        return over(spec["key"], rows, before, spec["frame"], spec["preceding"],
                    spec.get("late_rule", "watermark"))
    if kind == "enrichment":
        return enrichment(spec["key"], rows, tables[spec["table"]], spec["table_key"]) + ([],)
    if kind == "group":
        return group_agg(spec["key"], rows) + ([],)
    if kind == "top_n":
        return top_n(spec["key"], rows, spec["order"], spec["n"])
    if kind == "max_join":
        return max_join(spec["key"], rows) + ([],)
    if kind == "temporal_join":
        return temporal_join(spec["key"], rows, before, spec["min_price"],
                             spec.get("late_rule", "watermark"), spec.get("batch", False))
    raise ValueError(f"unknown reference kind {kind!r}")


# ---------------------------------------------------------------------------------------------
# Self-test: small cases worked out by hand, and the vectorized parts against a plain loop.


def _slow_before(times, delay_ms, interval_ms):
    ooo, step = max(delay_ms - 1, 0), max(interval_ms, 1)
    out, mx, last = [], None, None
    for t in times:
        out.append(I64_MIN if last is None else last)
        if mx is None or t > mx:
            mx = t
            cand = t - ooo - 1
            if last is None or cand >= last + step:
                last = cand
    return out


def _slow_flink_temporal(rows, before, min_price):
    """flink_temporal_pairs as a plain loop over the rows and watermarks: (probe, version) pairs
    sorted, with the versions chosen as the deduplication does (a row newer than its key's)."""
    keys, times = rows["bidder"].tolist(), rows["date_time"].tolist()
    state, out, latest, current = {}, [], {}, I64_MIN

    def fire(st, w):
        held = st["versions"]
        for t, row in st["waiting"]:
            if t <= w:
                mine = [v for v in held if v[0] <= t]
                if mine:
                    out.append((row, mine[-1][1]))
        st["waiting"] = [p for p in st["waiting"] if p[0] > w]
        newer = [x for x, v in enumerate(held) if v[0] > w]
        keep = (newer[0] - 1) if newer else len(held) - 1
        if keep > 0:
            del held[:keep]
        st["timer"] = min((p[0] for p in st["waiting"]), default=None)

    for i, (k, t) in enumerate(zip(keys, times)):
        if before[i] > current:
            current = int(before[i])
            for st in state.values():
                if st["timer"] is not None and st["timer"] <= current:
                    fire(st, current)
        st = state.setdefault(k, {"waiting": [], "versions": [], "timer": None})
        if rows["price"][i] > min_price and t > latest.get(k, I64_MIN):
            st["versions"].append((t, i))
        if rows["price"][i] > min_price:
            latest[k] = max(latest.get(k, I64_MIN), t)
        st["waiting"].append((t, i))
        if st["timer"] is None or st["timer"] > t:
            st["timer"] = t
    for st in state.values():
        if st["timer"] is not None:
            fire(st, np.iinfo(np.int64).max)
    return sorted(out)


def _self_test():
    # docs/event-time.md's example: ooo 500 ms (delay 501), interval 1 s.
    times = [1000, 1500, 1200, 2100, 2300, 100, 3000, 2500, 5000]
    before, n = emitted_before(np.array(times), 501, 1000)
    assert before.tolist() == [I64_MIN, 499, 499, 499, 1599, 1599, 1599, 1599, 1599], before
    assert n == 3
    rng = np.random.default_rng(7)
    for _ in range(200):
        t = rng.integers(-3000, 3000, size=int(rng.integers(1, 60))).cumsum()
        t = t + rng.integers(-2000, 1, size=len(t)) * (rng.random(len(t)) < 0.3)
        d, iv = int(rng.integers(0, 3000)), int(rng.integers(0, 500))
        assert emitted_before(t, d, iv)[0].tolist() == _slow_before(t.tolist(), d, iv)
    # Sliding 5/2: ts 4 is in [0,5), [2,7), [4,9).
    res, dropped = hop("k", np.array([1]), np.array([4]), np.array([7]), np.array([I64_MIN]), 5, 2)
    assert res["window_start"].tolist() == [0, 2, 4] and dropped == 0
    # ... with watermark 5 only [2,7) (end - 1 = 6 > 5) and [4,9) count.
    res, dropped = hop("k", np.array([1]), np.array([4]), np.array([7]), np.array([5]), 5, 2)
    assert res["window_start"].tolist() == [2, 4] and dropped == 0
    res, dropped = hop("k", np.array([1]), np.array([4]), np.array([7]), np.array([8]), 5, 2)
    assert len(res["window_start"]) == 0 and dropped == 1
    # Sessions, gap 10: rows 0 and 10 share a session (inclusive); 30 starts another; with the
    # watermark at 35 the first session [0, 20) has fired, so 12 (window [12, 22), end - 1 = 21
    # <= 35) touches nothing open and is dropped, while 25 joins [30, 40).
    k = np.array([1, 1, 1, 1, 1])
    t = np.array([0, 10, 30, 12, 25])
    wm = np.array([I64_MIN, I64_MIN, I64_MIN, 35, 35])
    p = np.array([1, 2, 3, 4, 5])
    res, dropped = session("k", k, t, p, wm, 10)
    got = sorted(zip(res["window_start"].tolist(), res["window_end"].tolist(),
                     res["bids"].tolist(), res["max_price"].tolist()))
    assert got == [(0, 20, 2, 2), (25, 40, 2, 5)], got
    assert dropped == 1
    # A late row bridging two open sessions merges them.
    res, dropped = session("k", np.array([1, 1, 1]), np.array([0, 30, 15]), np.array([1, 2, 3]),
                           np.array([I64_MIN, I64_MIN, 5]), 15)
    got = list(zip(res["window_start"].tolist(), res["window_end"].tolist(), res["bids"].tolist()))
    assert got == [(0, 45, 3)], got
    # sql/interval_join.slt's self-join: the shipments (ts, k a=1 b=2, item n) with the
    # watermark 2 ms behind, emitted on every advance; b.ts > a.ts AND b.ts <= a.ts + 10.
    # x4 (6) is late on both sides; the pairs are x1-x3, x3-x5, x5-x6.
    ship = {"date_time": np.array([2, 4, 9, 6, 14, 21, 30]),
            "auction": np.array([1, 2, 1, 1, 1, 1, 2]),
            "bidder": np.array([1, 2, 3, 4, 5, 6, 7]), "price": np.zeros(7, dtype=np.int64)}
    wm, _ = emitted_before(ship["date_time"], 2, 1)
    res, dropped = interval_self_join("auction", ship, wm, 0, 10, False, True)
    got = sorted(zip(res["a_bidder"].tolist(), res["b_bidder"].tolist()))
    assert got == [(1, 3), (3, 5), (5, 6)] and dropped == 2, (got, dropped)
    # sql/dedup_first.slt: (ts, k a=1 b=2 c=3, v), watermark 2 ms behind on every advance:
    # a's 4 (v 2), b's 7 (v 3), c's 12 (v 8); 1 a, 6 c and 7 c late.
    ev = {"date_time": np.array([5, 4, 7, 1, 9, 8, 6, 12, 13, 7]),
          "bidder": np.array([1, 1, 2, 1, 1, 2, 3, 3, 3, 3]),
          "price": np.array([1, 2, 3, 4, 5, 6, 7, 8, 10, 9]),
          "auction": np.zeros(10, dtype=np.int64)}
    wm, _ = emitted_before(ev["date_time"], 2, 1)
    res, dropped, notes = dedup_first("bidder", ev, wm)
    got = sorted(zip(res["bidder"].tolist(), res["date_time"].tolist(), res["price"].tolist()))
    assert got == [(1, 4, 2), (2, 7, 3), (3, 12, 8)] and dropped == 3 and not notes, (got, dropped)
    # Window Top-2 of tumbling windows of 10: window [0, 10) has sums k1 5, k2 9, k3 9, k4 1:
    # k2 and k3 tie (ranked by key), k1 third is out; [10, 20) has k1 only.
    res, dropped, notes = window_top_n(
        "k", np.array([1, 2, 3, 4, 2, 1]), np.array([1, 2, 3, 4, 5, 12]),
        np.array([5, 4, 9, 1, 5, 7]), np.full(6, I64_MIN), 10, 2)
    got = list(zip(res["window_start"].tolist(), res["k"].tolist(), res["total"].tolist(),
                   res["rn"].tolist()))
    assert got == [(0, 2, 9, 1), (0, 3, 9, 2), (10, 1, 7, 1)], got
    assert res["bids"].tolist() == [2, 1, 1] and dropped == 0 and len(notes) == 1
    # The vectorized join, dedup and Top-N against plain loops on random rows (some late).
    for _ in range(100):
        m = int(rng.integers(1, 80))
        t = np.arange(m) * int(rng.integers(1, 4))
        t = t - rng.integers(0, 30, size=m) * (rng.random(m) < 0.2)  # some rows behind
        r = {"date_time": t, "auction": rng.integers(0, 4, size=m),
             "bidder": rng.integers(0, 3, size=m), "price": rng.integers(0, 20, size=m)}
        wm, _ = emitted_before(t, int(rng.integers(0, 10)), int(rng.integers(0, 5)))
        lo, hi = sorted(int(x) for x in rng.integers(-6, 7, size=2))
        lo_inc, hi_inc = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
        res, dropped = interval_self_join("auction", r, wm, lo, hi, lo_inc, hi_inc)
        ok = [i for i in range(m) if t[i] > wm[i]]
        want = sorted(
            (int(r["auction"][i]), int(r["bidder"][i]), int(t[i]), int(r["bidder"][j]), int(t[j]))
            for i in ok for j in ok
            if r["auction"][i] == r["auction"][j]
            and (t[j] - t[i] >= lo if lo_inc else t[j] - t[i] > lo)
            and (t[j] - t[i] <= hi if hi_inc else t[j] - t[i] < hi))
        got = sorted(zip(res["auction"].tolist(), res["a_bidder"].tolist(),
                         res["a_time"].tolist(), res["b_bidder"].tolist(), res["b_time"].tolist()))
        assert got == want and dropped == 2 * (m - len(ok)), (got, want)
        res, dropped, _ = dedup_first("bidder", r, wm)
        want = {}
        for i in ok:
            row = (int(t[i]), int(r["auction"][i]), int(r["price"][i]))
            b = int(r["bidder"][i])
            want[b] = min(want.get(b, row), row)
        got = {b: (tt, a, p) for b, a, p, tt in zip(
            res["bidder"].tolist(), res["auction"].tolist(), res["price"].tolist(),
            res["date_time"].tolist())}
        assert got == want and dropped == m - len(ok), (got, want)
        res, dropped, _ = window_top_n("auction", r["auction"], t, r["price"], wm, 10, 2)
        agg, _ = hop("auction", r["auction"], t, r["price"], wm, 10, 10)
        windows = {}
        for k, st, c, tot in zip(agg["auction"].tolist(), agg["window_start"].tolist(),
                                 agg["bids"].tolist(), agg["total"].tolist()):
            windows.setdefault(st, []).append((-tot, k, c))
        want = sorted((st, k, c, -neg, i + 1) for st, w in windows.items()
                      for i, (neg, k, c) in enumerate(sorted(w)[:2]))
        got = sorted(zip(res["window_start"].tolist(), res["auction"].tolist(),
                         res["bids"].tolist(), res["total"].tolist(), res["rn"].tolist()))
        assert got == want, (got, want)
    # Window join of channels 0 and 1, tumbling 10, watermark 2 ms behind on every advance:
    # (ts, key, channel) a=(3,1,0) b=(5,1,1) c=(12,1,1) d=(25,1,0) e=(8,1,1) f=(9,1,0) g=(27,1,1):
    # e (window [0,10), last ms 9 <= watermark 22) and f are late on their sides; pairs a-b and
    # d-g.
    wj = {"date_time": np.array([3, 5, 12, 25, 8, 9, 27]), "auction": np.ones(7, dtype=np.int64),
          "channel": np.array([0, 1, 1, 0, 1, 0, 1]), "bidder": np.arange(7),
          "price": np.zeros(7, dtype=np.int64)}
    wm, _ = emitted_before(wj["date_time"], 2, 1)
    res, dropped = window_join("auction", wj, wm, 10, 0, 1)
    got = sorted(zip(res["window_start"].tolist(), res["l_bidder"].tolist(),
                     res["r_bidder"].tolist()))
    assert got == [(0, 0, 1), (20, 3, 6)] and dropped == 2, (got, dropped)
    # OVER: rows 10 and 10 are peers of a RANGE frame (both get both); 30 is 20 after them.
    ov = {"date_time": np.array([10, 10, 30, 20]), "auction": np.ones(4, dtype=np.int64),
          "bidder": np.array([2, 1, 3, 4]), "price": np.array([5, 7, 1, 9])}
    wm = np.array([I64_MIN, I64_MIN, I64_MIN, 25])  # 20 comes behind the watermark: late
    res, dropped, _ = over("auction", ov, wm, "range", 20)
    got = list(zip(res["date_time"].tolist(), res["bids"].tolist(), res["total"].tolist(),
                   res["max_price"].tolist()))
    assert got == [(10, 2, 12, 7), (10, 2, 12, 7), (30, 3, 13, 7)] and dropped == 1, got
    res, dropped, notes = over("auction", ov, wm, "rows", 1)
    got = list(zip(res["bidder"].tolist(), res["bids"].tolist(), res["total"].tolist()))
    assert got == [(1, 1, 7), (2, 2, 12), (3, 2, 6)] and len(notes) == 1, got
    # Enrichment: key 3 has no row in the table.
    res, dropped = enrichment("auction", {"auction": np.array([2, 3, 1, 2]),
                                          "bidder": np.zeros(4, dtype=np.int64),
                                          "price": np.arange(4), "date_time": np.arange(4)},
                              {"id": np.array([1, 2]), "name": np.array(["one", "two"])}, "id")
    assert list(zip(res["price"].tolist(), res["name"].tolist())) == [
        (0, "two"), (2, "one"), (3, "two")] and dropped == 0
    # The window join and OVER against plain loops on random rows (some late).
    for _ in range(100):
        m = int(rng.integers(1, 80))
        t = np.arange(m) * int(rng.integers(1, 4))
        t = t - rng.integers(0, 30, size=m) * (rng.random(m) < 0.2)
        r = {"date_time": t, "auction": rng.integers(0, 4, size=m),
             "bidder": rng.integers(0, 3, size=m), "price": rng.integers(0, 20, size=m),
             "channel": rng.integers(0, 3, size=m)}
        wm, _ = emitted_before(t, int(rng.integers(0, 10)), int(rng.integers(0, 5)))
        size = int(rng.integers(1, 12))
        res, dropped = window_join("auction", r, wm, size, 0, 1)
        on = [(t[i] // size * size + size - 1 > wm[i]) for i in range(m)]
        side = {c: [i for i in range(m) if r["channel"][i] == c and on[i]] for c in (0, 1)}
        want = sorted((int(t[i] // size * size), int(r["auction"][i]), int(r["bidder"][i]),
                       int(t[i]), int(r["bidder"][j]), int(t[j]))
                      for i in side[0] for j in side[1]
                      if r["auction"][i] == r["auction"][j] and t[i] // size == t[j] // size)
        got = sorted(zip(res["window_start"].tolist(), res["auction"].tolist(),
                         res["l_bidder"].tolist(), res["l_time"].tolist(),
                         res["r_bidder"].tolist(), res["r_time"].tolist()))
        late = sum(1 for i in range(m) if r["channel"][i] in (0, 1) and not on[i])
        assert got == want and dropped == late, (got, want)
        n_pre = int(rng.integers(0, 6))
        ok = [i for i in range(m) if t[i] > wm[i]]
        for frame in ("rows", "range"):
            res, dropped, _ = over("auction", r, wm, frame, n_pre)
            want = []
            for k in set(r["auction"][ok].tolist()):
                part = sorted((int(t[j]), int(r["bidder"][j]), int(r["price"][j]))
                              for j in ok if r["auction"][j] == k)
                for x, (tt, b, pr) in enumerate(part):
                    if frame == "rows":
                        prices = [q[2] for q in part[max(0, x - n_pre):x + 1]]
                    else:
                        prices = [q[2] for q in part if tt - n_pre <= q[0] <= tt]
                    want.append((k, tt, b, pr, len(prices), sum(prices), max(prices)))
            got = sorted(zip(res["auction"].tolist(), res["date_time"].tolist(),
                             res["bidder"].tolist(), res["price"].tolist(),
                             res["bids"].tolist(), res["total"].tolist(),
                             res["max_price"].tolist()))
            assert got == sorted(want) and dropped == m - len(ok), (frame, got, sorted(want))
    # The queries with updating results against plain loops on random rows (all rows count).
    for _ in range(100):
        m = int(rng.integers(1, 80))
        r = {"date_time": np.arange(m) - rng.integers(0, 5, size=m) * (rng.random(m) < 0.3),
             "auction": rng.integers(0, 5, size=m), "bidder": rng.integers(0, 4, size=m),
             "price": rng.integers(0, 8, size=m)}
        rowlist = list(zip(*(r[c].tolist() for c in ("auction", "bidder", "price", "date_time"))))
        res, dropped = group_agg("auction", r)
        want = {}
        for a, _, p_, _ in rowlist:
            c, s_, mx = want.get(a, (0, 0, p_))
            want[a] = (c + 1, s_ + p_, max(mx, p_))
        got = {a: (c, s_, mx) for a, c, s_, mx in zip(*(res[x].tolist() for x in
                                                        ("auction", "bids", "total", "top")))}
        assert got == want and dropped == 0, (got, want)
        res, _ = max_join("auction", r)
        tops = {a: v[2] for a, v in want.items()}
        got = sorted(zip(*(res[x].tolist() for x in ("auction", "bidder", "price", "date_time",
                                                     "top"))))
        assert got == sorted(row + (tops[row[0]],) for row in rowlist), got
        for order_name, col, n in (("price", 2, int(rng.integers(1, 5))), ("date_time", 3, 1)):
            res, _, notes, alt = top_n("auction", r, order_name, n)
            got = sorted(zip(*(res[x].tolist() for x in ("auction", "bidder", "price",
                                                         "date_time"))))
            want, want_alt = [], []
            for a in set(r["auction"].tolist()):
                part = sorted((row for row in rowlist if row[0] == a),
                              key=lambda row: (-row[col],) + tuple(
                                  row[j] for j in (1, 2, 3) if j != col))
                want += part[:n]
                if len(part) > n and part[n][col] == part[n - 1][col]:
                    want_alt += [row for row in part if row[col] == part[n - 1][col]]
            got_alt = sorted(zip(*(alt[x].tolist() for x in ("auction", "bidder", "price",
                                                             "date_time"))))
            assert got == sorted(want) and got_alt == sorted(want_alt), (got, want)
            assert bool(notes) == bool(want_alt)
    # Temporal join, versions the rows above price 50, watermark 2 ms behind on every advance:
    # (ts, key, price) rows 0..13. Row 3 (5) and row 10 (13) are late probes and older than
    # their key's latest version; row 5 (9) is a late probe; row 12 (k2 at 19) is a late probe
    # and a late version; row 11 (k3) has no version.
    tj = {"date_time": np.array([1, 3, 10, 5, 12, 9, 11, 15, 14, 20, 13, 25, 19, 26]),
          "bidder": np.array([1, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 3, 2, 2]),
          "price": np.array([60, 10, 70, 80, 90, 20, 55, 1, 95, 99, 99, 5, 99, 1]),
          "auction": np.arange(14)}
    wm, _ = emitted_before(tj["date_time"], 2, 1)
    res, late, notes = temporal_join("bidder", tj, wm, 50)
    got = sorted(zip(res["auction"].tolist(), res["high_auction"].tolist()))
    assert got == [(0, 0), (1, 0), (2, 2), (4, 4), (6, 6), (7, 6), (8, 8), (9, 9), (13, 8)], got
    # Rows 3 and 10, older than their bidder's latest version, are versions too, and late.
    assert late == 7 and not notes, (late, notes)
    # Flink: the late probe row 3 still finds the version of row 0 (its bidder's timer has not
    # fired past 10 yet), row 5 no longer does (it was removed at watermark 10), row 10 finds
    # row 6's; the late version of row 12 is kept and row 13 joins it.
    res, late, _ = temporal_join("bidder", tj, wm, 50, late_rule="flink")
    got = sorted(zip(res["auction"].tolist(), res["high_auction"].tolist()))
    assert got == [(0, 0), (1, 0), (2, 2), (3, 0), (4, 4), (6, 6), (7, 6), (8, 8), (9, 9),
                   (10, 6), (12, 12), (13, 12)] and late == 0, got
    # The temporal join under both rules against plain loops on random rows (some late).
    for _ in range(300):
        m = int(rng.integers(1, 80))
        t = np.arange(m) * int(rng.integers(1, 4))
        t = t - rng.integers(0, 30, size=m) * (rng.random(m) < 0.3)
        r = {"date_time": t, "bidder": rng.integers(0, 4, size=m),
             "price": rng.integers(0, 10, size=m), "auction": np.arange(m)}
        wm, _ = emitted_before(t, int(rng.integers(0, 10)), int(rng.integers(0, 3)))
        res, late, notes = temporal_join("bidder", r, wm, 6)
        got = sorted(zip(res["auction"].tolist(), res["high_auction"].tolist()))
        want, versions, want_late = [], [], 0
        for i in range(m):
            k, ti = int(r["bidder"][i]), int(t[i])
            if r["price"][i] > 6:
                if ti > wm[i]:
                    versions.append((k, ti, i))
                else:
                    want_late += 1
        for i in range(m):
            k, ti = int(r["bidder"][i]), int(t[i])
            if ti <= wm[i]:
                want_late += 1
                continue
            mine = [(tv, j) for kv, tv, j in versions if kv == k and tv <= ti]
            if mine:
                want.append((i, max(mine)[1]))
        if not notes:
            assert got == sorted(want) and late == want_late, (got, sorted(want))
        res, _, _ = temporal_join("bidder", r, wm, 6, late_rule="flink")
        got = sorted(zip(res["auction"].tolist(), res["high_auction"].tolist()))
        if not notes:
            assert got == _slow_flink_temporal(r, wm, 6), (got, _slow_flink_temporal(r, wm, 6))
    assert watermark_spec("WATERMARK FOR ts AS ts - INTERVAL '5' SECOND") == (5000, 200)
    assert watermark_spec(
        "WATERMARK FOR ts AS ts - INTERVAL '250' MILLISECOND ) WITH ("
        "'watermark.interval' = '1s')") == (250, 1000)
    print("reference self-test: OK")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--self-test"]:
        _self_test()
    else:
        sys.exit("usage: reference.py --self-test  (compare.py imports this module)")
