#!/usr/bin/env python3
"""Weir against DuckDB on the same bids data (scripts/compare/README.md).

Generates the bids data with DuckDB (once per row count; about 1% of the rows come 10 to 60 s
late in event time), runs every selected query and format in Weir (`weir run --json` into the
blackhole sink), in DuckDB (materialized into a temp table) and, with --flink, in Flink SQL
(PyFlink, flink_runner.py), checks Weir's results at every parallelism it runs (and Flink's)
against a sequential reference (reference.py: the rows in file order under Weir's event-time
rules), prints a Markdown table and writes the same as JSON. DuckDB computes each query over
all rows (it has no notion of late rows): it is the speed reference, not the correctness one.
Started by scripts/compare/run.sh, which provides a Python with duckdb and numpy (and
apache-flink for --flink).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

import flink_runner
import reference
import templates

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
QUERY_DIR = HERE / "queries"

# Bump when the generated data changes: existing data with another version is regenerated.
# 1: in order; 2: about 1% of the rows 10 to 60 s late.
GENERATOR_VERSION = 2
PARQUET_ROW_GROUP = 122_880
FORMATS = ("csv", "parquet", "json")
EXTENSIONS = {"csv": "csv", "parquet": "parquet", "json": "jsonl"}
# The bids' channels; the reference reads a channel as its index here.
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS_SQL = "[" + ", ".join(f"'{c}'" for c in CHANNELS) + "]"
# The bounded dimension table of `enrichment`: one row per auction id (1000 to 10999).
AUCTIONS_ROWS = 10_000
# Bump when the generated auctions change (written again when their stamp differs).
AUCTIONS_VERSION = 1

# name -> (formats run by default, parallelism-1 runs on these formats, description)
QUERIES = {
    "tumble": (("csv", "parquet", "json"), ("csv", "parquet"), "tumble 10 s per auction"),
    "hop10": (("csv", "parquet"), (), "hop size 10 s slide 2 s per auction"),
    "hop5": (("csv", "parquet"), (), "hop size 5 s slide 2 s per auction"),
    "session": (("csv", "parquet"), (), "session gap 3 s per bidder"),
    "filter": (("csv", "parquet"), ("csv", "parquet"), "filter price > 90000 + project"),
    "interval_join": (("csv", "parquet"), (),
                      "self interval join: the later bids of an auction within 1 s"),
    "dedup": (("csv", "parquet"), (), "first bid per bidder in event time (ROW_NUMBER = 1)"),
    "top3": (("csv", "parquet"), (), "window Top-3 auctions by SUM(price) per 10 s tumble"),
    "window_join": (("csv", "parquet"), (),
                    "window join: Google with Apple bids of an auction per 10 s tumble"),
    "over_rows": (("csv", "parquet"), (),
                  "OVER per auction, ROWS 9 PRECEDING: COUNT, SUM, MAX of price"),
    "over_range": (("csv", "parquet"), (),
                   "OVER per auction, RANGE 10 s PRECEDING: COUNT, SUM, MAX of price"),
    "enrichment": (("csv", "parquet"), (),
                   "every bid joined with its auction's row of a 10,000-row bounded table"),
    "group_count": (("csv", "parquet"), (),
                    "GROUP BY auction without a window (updating): COUNT, SUM, MAX of price"),
    "last_bid": (("csv", "parquet"), (),
                 "the latest bid per auction (ROW_NUMBER ... ORDER BY ts DESC = 1, updating)"),
    "top10": (("csv", "parquet"), (),
              "Top-10 bids by price per auction without a window (updating)"),
    "changing_join": (("csv", "parquet"), (),
                      "regular join: every bid with its auction's MAX(price) so far (updating)"),
    "temporal_join": (("csv", "parquet"), (),
                      "event-time temporal join: every bid with its bidder's latest bid above "
                      "95,000 as of its time"),
}

# What the sequential reference (reference.py) computes for each query: the same windows,
# keys and aggregates as queries/<name>.weir.sql (check_reference_specs() compares the window
# sizes with the scripts' INTERVALs). Times in milliseconds.
REFERENCE = {
    "tumble": {"kind": "hop", "key": "auction", "size": 10_000, "slide": 10_000},
    "hop10": {"kind": "hop", "key": "auction", "size": 10_000, "slide": 2_000},
    "hop5": {"kind": "hop", "key": "auction", "size": 5_000, "slide": 2_000},
    "session": {"kind": "session", "key": "bidder", "gap": 3_000},
    "filter": {"kind": "filter", "min_price": 90_000},
    # b.ts > a.ts AND b.ts <= a.ts + 1 s: lower bound 0 exclusive, upper 1000 inclusive.
    "interval_join": {"kind": "interval_join", "key": "auction", "lower": 0,
                      "lower_inclusive": False, "upper": 1_000, "upper_inclusive": True},
    "dedup": {"kind": "dedup", "key": "bidder"},
    "top3": {"kind": "window_top_n", "key": "auction", "size": 10_000, "n": 3},
    # Channels as their index in CHANNELS (the reference reads them so).
    "window_join": {"kind": "window_join", "key": "auction", "size": 10_000,
                    "left": CHANNELS.index("Google"), "right": CHANNELS.index("Apple")},
    "over_rows": {"kind": "over", "key": "auction", "frame": "rows", "preceding": 9},
    "over_range": {"kind": "over", "key": "auction", "frame": "range", "preceding": 10_000},
    "enrichment": {"kind": "enrichment", "key": "auction", "table": "auctions",
                   "table_key": "id"},
    # Updating results (README.md, "Updating results"): the engines write changes, the
    # reference is the final table they must leave. `ties`: the columns on which the result is
    # determined where equal values leave the choice of rows to the engine (top_n's
    # alternatives).
    "group_count": {"kind": "group", "key": "auction", "updating": True},
    "last_bid": {"kind": "top_n", "key": "auction", "order": "date_time", "n": 1,
                 "updating": True, "ties": ("auction", "date_time")},
    "top10": {"kind": "top_n", "key": "auction", "order": "price", "n": 10, "updating": True,
              "ties": ("auction", "price")},
    "changing_join": {"kind": "max_join", "key": "auction", "updating": True},
    # The versions: the bids above min_price, the last of each key by time (a versioned view).
    # `bids`: the columns of each result row that name a bid (as BID_COLUMNS), the probe
    # first, then the version it joined (late_differences).
    "temporal_join": {"kind": "temporal_join", "key": "bidder", "min_price": 95_000,
                      "bids": (("auction", "bidder", "price", "date_time"),
                               ("high_auction", "bidder", "high_price", "high_time"))},
}

# Queries whose late rows Flink decides by another rule than Weir's, which the reference can
# model too (reference.flink_over_kept: Flink's bounded OVER compares a row with its key's last
# fired timer, not with the watermark; reference.flink_temporal_pairs: Flink's temporal join
# drops no row, a late row is joined with the versions its key still holds). Flink's output is
# compared with the reference under both rules: a difference under Weir's is the rules'
# (shown), one under Flink's is not, except where the spec names its `bids`: there what Flink
# makes of a late bid depends on how its two inputs interleave, so only a difference that no
# late bid explains counts (late_differences).
FLINK_LATE_RULES = {"over_rows": "flink", "over_range": "flink", "temporal_join": "flink"}

# The columns that identify a bid (a late one, in late_differences).
BID_COLUMNS = ("auction", "bidder", "price", "date_time")

BIDS_COLUMNS = {
    "auction": "BIGINT",
    "bidder": "BIGINT",
    "price": "BIGINT",
    "channel": "VARCHAR",
    "url": "VARCHAR",
    "date_time": "BIGINT",
    "extra": "VARCHAR",
}
AUCTIONS_COLUMNS = {"id": "BIGINT", "seller": "BIGINT", "category": "VARCHAR"}

# A 32-bit integer hash made of UBIGINT arithmetic only (products of two values below 2^32
# stay below 2^64), so the data depend on nothing but this text and the row count.
HASH_MACROS = """
CREATE OR REPLACE TEMP MACRO mul32(x, m) AS (x * m::UBIGINT) % 4294967296::UBIGINT;
CREATE OR REPLACE TEMP MACRO xs(x, s) AS xor(x, x >> s);
CREATE OR REPLACE TEMP MACRO h32(i, seed) AS
  xs(mul32(xs(mul32(xs(mul32((i::UBIGINT + seed::UBIGINT * 1000003) % 4294967296::UBIGINT,
      2654435761), 16), 2246822519), 13), 3266489917), 16)::BIGINT;
"""

# Row i is written i-th. Its event time is 1,700,000,000,000 + i ms, except for the rows with
# h32(i, 7) % 100 = 0 (about 1%): those are late by 10,000 + h32(i, 8) % 50,001 ms (10 to 60 s
# behind the rows around them, a delay the 5 s watermark does not cover).
BIDS_SELECT = """
SELECT
  1000 + h32(i, 1) % 10000 AS auction,
  1000 + h32(i, 2) % 2000 AS bidder,
  1 + h32(i, 3) % 100000 AS price,
  {channels}[1 + h32(i, 4) % 4] AS channel,
  'https://www.nexmark.com/item.htm?id=' || lpad((h32(i, 5) % 100000)::VARCHAR, 5, '0') AS url,
  1700000000000 + i
    - CASE WHEN h32(i, 7) % 100 = 0 THEN 10000 + h32(i, 8) % 50001 ELSE 0 END AS date_time,
  'x' || (h32(i, 6) % 1000)::VARCHAR AS extra
FROM range({rows}) t(i)
ORDER BY i
"""

# The auctions of `enrichment`: id 1000 + i (every auction of the bids once), a seller and one
# of 50 categories.
AUCTIONS_SELECT = """
SELECT
  1000 + i AS id,
  1000 + h32(i, 11) % 5000 AS seller,
  'category-' || (h32(i, 12) % 50)::VARCHAR AS category
FROM range({rows}) t(i)
ORDER BY i
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def q(path):
    """A path as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


# ---------------------------------------------------------------------------------------------
# Data


def generate(con, data_dir, rows):
    """Writes the bids (bids.csv, bids.parquet, bids.jsonl) and the auctions (auctions.*) into
    data_dir, each unless its stamp matches."""
    data_dir.mkdir(parents=True, exist_ok=True)
    con.execute(HASH_MACROS)
    write_table(con, data_dir, "bids", BIDS_SELECT.format(rows=int(rows), channels=CHANNELS_SQL),
                "stamp.json", {"rows": rows, "generator": GENERATOR_VERSION})
    write_table(con, data_dir, "auctions", AUCTIONS_SELECT.format(rows=AUCTIONS_ROWS),
                "auctions-stamp.json", {"rows": AUCTIONS_ROWS, "generator": AUCTIONS_VERSION})


def table_file(data_dir, table, fmt):
    """The file of `table` (bids, auctions) in format `fmt`."""
    return data_dir / f"{table}.{EXTENSIONS[fmt]}"


def write_table(con, data_dir, table, select, stamp_name, stamp):
    """Writes the rows of `select` in every format as data_file(table, fmt) (each under a
    `.partial` name first), then the stamp; nothing when the stamp and the files are there."""
    stamp_path = data_dir / stamp_name
    files = [table_file(data_dir, table, fmt) for fmt in FORMATS]
    if stamp_path.exists() and all(f.exists() for f in files):
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                log(f"data: reusing the {table} in {data_dir} ({stamp['rows']:,} rows)")
                return
        except ValueError:
            pass
    stamp_path.unlink(missing_ok=True)
    log(f"data: generating {stamp['rows']:,} {table} into {data_dir}")
    started = time.perf_counter()
    copies = {
        "csv": "(FORMAT CSV, HEADER true, DELIMITER ',')",
        "parquet": f"(FORMAT PARQUET, ROW_GROUP_SIZE {PARQUET_ROW_GROUP})",
        "json": "(FORMAT JSON)",
    }
    for fmt, options in copies.items():
        final = table_file(data_dir, table, fmt)
        partial = final.with_name(final.name + ".partial")
        con.execute(f"COPY ({select}) TO {q(partial)} {options}")
        os.replace(partial, final)
        log(f"data:   {final.name}: {final.stat().st_size / 1e6:,.1f} MB")
    stamp_path.write_text(json.dumps(stamp) + "\n")
    log(f"data: generated in {time.perf_counter() - started:.1f} s")


def duckdb_source(fmt, path, column_types=None):
    """The DuckDB table function reading a data file (the bids unless column_types says)."""
    column_types = column_types or BIDS_COLUMNS
    columns = "{" + ", ".join(f"'{c}': '{t}'" for c, t in column_types.items()) + "}"
    if fmt == "csv":
        return f"read_csv({q(path)}, header = true, auto_detect = false, columns = {columns})"
    if fmt == "parquet":
        return f"read_parquet({q(path)})"
    return f"read_json({q(path)}, format = 'newline_delimited', columns = {columns})"


def load_rows(con, fmt, path):
    """The columns the queries read, as int64 numpy arrays in file order (the channel as its
    index in CHANNELS)."""
    cols = con.execute(
        f"SELECT auction, bidder, price, date_time, list_position({CHANNELS_SQL}, channel) - 1 "
        f"AS channel FROM {duckdb_source(fmt, path)}"
    ).fetchnumpy()
    return {name: np.asarray(values, dtype=np.int64) for name, values in cols.items()}


def load_table(con, path, column_types):
    """A bounded table's Parquet file as numpy arrays (int64 for BIGINT, else objects)."""
    cols = con.execute(f"SELECT * FROM {duckdb_source('parquet', path)}").fetchnumpy()
    return {name: np.asarray(cols[name], dtype=np.int64 if t == "BIGINT" else object)
            for name, t in column_types.items()}


def same_order(con, fmt, path, date_time):
    """Whether the file of `fmt` holds the reference's rows in the same order (by date_time)."""
    got = con.execute(f"SELECT date_time FROM {duckdb_source(fmt, path)}").fetchnumpy()
    return np.array_equal(np.asarray(got["date_time"], dtype=np.int64), date_time)


def spec_text(spec):
    """What a query's Weir script must hold for REFERENCE's spec to describe it: (its
    INTERVALs in milliseconds, in order; other text it must contain)."""
    kind, key = spec["kind"], spec.get("key")
    if kind == "hop":
        return ([spec["size"]] if spec["size"] == spec["slide"]
                else [spec["slide"], spec["size"]]), []
    if kind == "session":
        return [spec["gap"]], []
    if kind == "filter":
        return [], [f"price > {spec['min_price']}"]
    if kind == "interval_join":
        return [b for b in (spec["lower"], spec["upper"]) if b], [
            f"a.{key} = b.{key}",
            "b.ts >" + ("=" if spec["lower_inclusive"] else "") + " a.ts",
            "b.ts <" + ("=" if spec["upper_inclusive"] else "") + " a.ts"]
    if kind == "dedup":
        return [], [f"PARTITION BY {key} ORDER BY ts", "rn = 1"]
    if kind == "window_top_n":
        return [spec["size"]], [f"rn <= {spec['n']}", "ORDER BY total DESC"]
    if kind == "window_join":
        return [spec["size"], spec["size"]], [
            f"channel = '{CHANNELS[spec['left']]}') L", f"channel = '{CHANNELS[spec['right']]}') R",
            "L.window_start = R.window_start AND L.window_end = R.window_end",
            f"L.{key} = R.{key}"]
    if kind == "over" and spec["frame"] == "rows":
        return [], [f"PARTITION BY {key} ORDER BY ts",
                    f"ROWS BETWEEN {spec['preceding']} PRECEDING AND CURRENT ROW"]
    if kind == "over":
        return [spec["preceding"]], [f"PARTITION BY {key} ORDER BY ts", "RANGE BETWEEN INTERVAL",
                                     "PRECEDING AND CURRENT ROW"]
    if kind == "enrichment":
        return [], [f"JOIN {spec['table']} a ON b.{key} = a.{spec['table_key']}"]
    if kind == "group":
        return [], [f"SELECT {key}, COUNT(*) AS bids, SUM(price) AS total, MAX(price) AS top",
                    f"FROM bids GROUP BY {key};"]
    if kind == "top_n":
        order = "ts" if spec["order"] == "date_time" else spec["order"]
        return [], [f"PARTITION BY {key} ORDER BY {order} DESC",
                    "rn = 1" if spec["n"] == 1 else f"rn <= {spec['n']}"]
    if kind == "temporal_join":
        return [], [f"PARTITION BY {key} ORDER BY ts DESC", "WHERE rn = 1",
                    f"FROM bids WHERE price > {spec['min_price']})",
                    f"FOR SYSTEM_TIME AS OF b.ts AS h ON b.{key} = h.{key}"]
    if kind == "max_join":
        return [], [f"SELECT b.{key}, b.bidder, b.price, b.date_time, m.top",
                    f"JOIN (SELECT {key}, MAX(price) AS top FROM bids GROUP BY {key}) m",
                    f"ON b.{key} = m.{key}"]
    raise ValueError(f"unknown reference kind {kind!r}")


def check_reference_specs():
    """Stops when REFERENCE and queries/<name>.weir.sql disagree (spec_text)."""
    for query, spec in REFERENCE.items():
        sql = (QUERY_DIR / f"{query}.weir.sql").read_text()
        intervals = [reference.duration_ms(v + u)
                     for v, u in re.findall(r"INTERVAL\s+'([^']+)'\s+(\w+)", sql, re.I)]
        want, needs = spec_text(spec)
        for text in needs:
            if text not in " ".join(sql.split()):
                sys.exit(f"compare: queries/{query}.weir.sql has no `{text}`, which compare.py's "
                         "REFERENCE assumes: change both")
        if intervals != want:
            sys.exit(
                f"compare: queries/{query}.weir.sql has the intervals {intervals} ms, "
                f"compare.py's REFERENCE {want} ms: change both"
            )


class References:
    """The sequential reference's results, computed once per query (watermark interval and
    late rule) over the rows in file order and kept as DuckDB tables
    `ref_<query>[_<interval>][_<late rule>]`."""

    def __init__(self, con, rows, tables, delay_ms, interval_ms):
        self.con = con
        self.rows = rows
        self.bounded = tables  # the bounded tables (the auctions), by name
        self.delay_ms = delay_ms
        self.interval_ms = interval_ms
        self.before = {}
        self.tables = {}
        # Queries whose reference without lateness was compared with DuckDB's result.
        self.checked_against_duckdb = {}

    def watermarks(self, interval_ms):
        if interval_ms not in self.before:
            started = time.perf_counter()
            before, emitted = reference.emitted_before(
                self.rows["date_time"], self.delay_ms, interval_ms
            )
            self.before[interval_ms] = before
            log(
                f"reference: {emitted:,} watermarks emitted (every {interval_ms} ms of event time, "
                f"{self.delay_ms} ms behind the largest event time) in "
                f"{time.perf_counter() - started:.1f} s"
            )
        return self.before[interval_ms]

    def table(self, query, interval_ms=None, late_rule=None):
        """(table name, facts) of the reference of `query`; facts: rows, late_rows, secs.
        late_rule: another engine's rule for late rows (FLINK_LATE_RULES) instead of Weir's."""
        interval_ms = self.interval_ms if interval_ms is None else interval_ms
        name = (f"ref_{query}" + ("" if interval_ms == self.interval_ms else f"_{interval_ms}")
                + (f"_{late_rule}" if late_rule else ""))
        if name not in self.tables:
            before = self.watermarks(interval_ms)
            started = time.perf_counter()
            spec = dict(REFERENCE[query], **({"late_rule": late_rule} if late_rule else {}))
            out = reference.compute(spec, self.rows, before, self.bounded)
            result, late, notes = out[:3]
            secs = time.perf_counter() - started
            register(self.con, name, result)
            n = len(next(iter(result.values())))
            self.tables[name] = {"rows": n, "late_rows": late, "secs": secs,
                                 "watermark_interval_ms": interval_ms, "notes": notes}
            if len(out) > 3:
                # The rows any of which the engine may have chosen where values tie.
                register(self.con, f"{name}_alt", out[3])
                self.tables[f"{name}_alt"] = {}
                self.tables[name]["alternatives"] = f"{name}_alt"
            rule = f" under {late_rule}'s late rule" if late_rule else ""
            log(f"   reference{rule}: {n:,} rows, {late:,} late rows dropped ({secs:.1f} s)")
            for note in notes:
                log(f"   reference: {note}")
        return name, self.tables[name]

    def late_bids(self, interval_ms):
        """Name of a table of the late bids' BID_COLUMNS with the watermark emitted every
        interval_ms (the bids at or behind the watermark before them)."""
        name = f"late_bids_{interval_ms}"
        if name not in self.tables:
            late = self.rows["date_time"] <= self.watermarks(interval_ms)
            register(self.con, name, {c: self.rows[c][late] for c in BID_COLUMNS})
            self.tables[name] = {}
        return name

    def drop(self, query):
        """Drops the tables of `query` (its cases are done): they can be large."""
        names = [n for n in self.tables if n == f"ref_{query}" or n.startswith(f"ref_{query}_")]
        for name in names:
            self.con.execute(f"DROP TABLE IF EXISTS {name}")
            del self.tables[name]

    def without_lateness(self, query):
        """Name of a table with the reference's windows over every row (no row late) read as
        one batch (`batch`: without an arrival order, which only the temporal join's versions
        depend on): what DuckDB's batch query computes, so that the two can be compared."""
        name = f"ref_{query}_all"
        if name not in self.tables:
            before = np.full(len(self.rows["date_time"]), reference.I64_MIN, dtype=np.int64)
            spec = dict(REFERENCE[query], batch=True)
            result = reference.compute(spec, self.rows, before, self.bounded)[0]
            register(self.con, name, result)
            self.tables[name] = {}
        return name


def register(con, name, columns):
    """A DuckDB temp table `name` holding numpy columns (a dict, in column order)."""
    con.register("ref_arrays", columns)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM ref_arrays")
    con.unregister("ref_arrays")


# ---------------------------------------------------------------------------------------------
# Weir


def weir_script(query, fmt, data_file, sink_options, out_path, split_size=None):
    """Writes the Weir script of one query, format and sink (templates.py) into out_path."""
    options = "" if split_size is None else f",\n  'split-size' = '{int(split_size)}'"
    return templates.render(
        "weir", query, out_path, bids_path=data_file, bids_format=fmt, bids_options=options,
        sink_options=sink_options, auctions_path=table_file(data_file.parent, "auctions", fmt),
        auctions_format=fmt, auctions_options="",
    )


def run_weir(weir_bin, script, parallelism):
    """Runs one job; returns its summary plus `process_secs`, or raises RuntimeError."""
    cmd = [str(weir_bin), "run", "--json", "-p", str(parallelism), str(script)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=script.parent)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {proc.returncode}:\n{tail}")
    summary = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            summary = json.loads(line)
            break
    if summary is None:
        raise RuntimeError(f"`{' '.join(cmd)}` printed no JSON summary:\n{proc.stdout[-2000:]}")
    operators = summary.get("operators") or []
    return {
        "parallelism": parallelism,
        "process_secs": elapsed,
        "wall_time_secs": summary.get("wall_time_secs"),
        "source_rows": summary.get("source_rows"),
        "sink_rows": summary.get("sink_rows"),
        # Rows the windows dropped as late (the late policy is `drop`).
        "dropped": sum(o.get("dropped", 0) for o in operators),
        "peak_rss_bytes": summary.get("peak_rss_bytes"),
    }


# ---------------------------------------------------------------------------------------------
# Check


def weir_source(weir_dir):
    """DuckDB SQL reading Weir's Parquet part files, or None when it wrote none."""
    files = sorted(weir_dir.glob("**/part-*.parquet"))
    if not files:
        return None
    return f"read_parquet([{', '.join(q(f) for f in files)}])"


CHANGE_KINDS = ("+I", "-U", "+U", "-D")


def materialize_changes(con, out_dir, ref_table, table="weir_final"):
    """Reads Weir's 'changelog-json' part files in out_dir (one `{"data": {...}, "op": ...}` a
    line) and materializes them into the temp table `table`: each data row counted +1 for
    `+I`/`+U` and -1 for `-U`/`-D`, the rows with a positive count that many times. The data's
    columns and types are ref_table's. Returns (table, or None when Weir wrote no file; the
    number of changes; a summary of the changes; problems: a list of texts, empty when every
    op is one of the four kinds and no row's count is negative)."""
    files = sorted(f for f in out_dir.glob("**/part-*") if f.is_file() and f.stat().st_size)
    if not files:
        return None, 0, "no changes", []
    ref_cols = con.execute(f"DESCRIBE {ref_table}").fetchall()
    names = [c[0] for c in ref_cols]
    struct = "STRUCT(" + ", ".join(f'"{name}" {t}' for name, t, *_ in ref_cols) + ")"
    struct = struct.replace("'", "''")
    cols = ", ".join(f'"{name}"' for name in names)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE weir_changes AS SELECT "
        + ", ".join(f'data."{name}" AS "{name}"' for name in names)
        + f", op FROM read_json([{', '.join(q(f) for f in files)}], "
        f"format = 'newline_delimited', columns = {{'data': '{struct}', 'op': 'VARCHAR'}})"
    )
    kinds = dict(con.execute("SELECT op, count(*) FROM weir_changes GROUP BY op").fetchall())
    total = sum(kinds.values())
    summary = f"{total:,} changes: " + ", ".join(
        f"{k} {kinds.get(k, 0):,}" for k in CHANGE_KINDS)
    problems = []
    other = {k: v for k, v in kinds.items() if k not in CHANGE_KINDS}
    if other:
        problems.append(f"changes of unknown kinds: {other}")
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE weir_counts AS SELECT {cols}, "
        "sum(CASE WHEN op IN ('+I', '+U') THEN 1 ELSE -1 END)::BIGINT AS n "
        f"FROM weir_changes WHERE op IN ('+I', '-U', '+U', '-D') GROUP BY ALL"
    )
    negative = con.execute(
        f"SELECT count(*), coalesce(sum(-n), 0) FROM weir_counts WHERE n < 0").fetchall()[0]
    if negative[0]:
        rows = con.execute(
            f"SELECT {cols}, n FROM weir_counts WHERE n < 0 ORDER BY ALL LIMIT 5").fetchall()
        problems.append(
            f"{negative[0]:,} rows retracted more often than inserted ({negative[1]:,} "
            f"retractions too many), first: {rows}")
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {cols} FROM "
        f"(SELECT {cols}, unnest(range(n)) AS copy FROM weir_counts WHERE n > 0)"
    )
    con.execute("DROP TABLE IF EXISTS weir_changes")
    con.execute("DROP TABLE IF EXISTS weir_counts")
    return table, total, summary, problems


def compare_with_ties(con, ref_table, table, alt_table, tie_cols, engine, ref):
    """After a difference in full rows: whether the engine's rows are another choice among
    tied rows. True when the two tables are equal on tie_cols (as multisets), every row in
    which they differ has tie_cols values of a tied group (alt_table: every row of the tied
    groups), and the engine's rows in those groups are rows of alt_table (as a multiset).
    Returns (ok, text)."""
    proj = ", ".join(f'"{c}"' for c in tie_cols)
    count = lambda sql: con.execute(f"SELECT count(*) FROM ({sql})").fetchall()[0][0]  # noqa
    proj_diff = (count(f"SELECT {proj} FROM {ref_table} EXCEPT ALL SELECT {proj} FROM {table}")
                 + count(f"SELECT {proj} FROM {table} EXCEPT ALL SELECT {proj} FROM {ref_table}"))
    diff = (f"(SELECT * FROM {ref_table} EXCEPT ALL SELECT * FROM {table}) UNION ALL "
            f"(SELECT * FROM {table} EXCEPT ALL SELECT * FROM {ref_table})")
    outside = count(f"SELECT {proj} FROM ({diff}) EXCEPT SELECT {proj} FROM {alt_table}")
    same = " AND ".join(f'g."{c}" = t."{c}"' for c in tie_cols)
    in_groups = f"SELECT * FROM {table} t WHERE EXISTS (SELECT 1 FROM {alt_table} g WHERE {same})"
    not_alt = count(f"{in_groups} EXCEPT ALL SELECT * FROM {alt_table}")
    n_diff = count(diff)
    if proj_diff == 0 and outside == 0 and not_alt == 0:
        return True, (f"equal on ({', '.join(tie_cols)}); the {n_diff:,} rows that differ are "
                      f"other choices among rows tied on them")
    return False, (f"on ({', '.join(tie_cols)}): {proj_diff:,} rows differ; {outside:,} "
                   f"values of them in differing rows outside the tied groups; {not_alt:,} "
                   f"rows of {engine} in the tied groups are none of the tied rows")


def compare_results(con, ref_table, src, engine="Weir", ref="the reference", limit=5,
                    ties=None):
    """Compares an engine's output (src: DuckDB SQL reading it, None when it wrote nothing) with
    the table ref_table as multisets; returns (ok, text). ties: (tie columns, the reference's
    alternatives table): where the full rows differ, compare_with_ties decides."""
    ref_cols = con.execute(f"DESCRIBE {ref_table}").fetchall()
    if src is None:
        ref_rows = con.execute(f"SELECT count(*) FROM {ref_table}").fetchall()[0][0]
        if ref_rows == 0:
            return True, "OK (both empty)"
        return False, f"{engine} wrote no rows, {ref} has {ref_rows:,}"
    out_cols = con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()
    if [c[0] for c in out_cols] != [c[0] for c in ref_cols]:
        return False, (
            f"columns differ: {engine} {[c[0] for c in out_cols]}, "
            f"{ref} {[c[0] for c in ref_cols]}"
        )
    # Window bounds (TIMESTAMP(3)) as epoch milliseconds, everything as the reference's types.
    exprs = []
    for (name, wtype, *_), (_, rtype, *_) in zip(out_cols, ref_cols):
        col = f'"{name}"'
        if wtype.startswith("TIMESTAMP"):
            col = f"epoch_ms({col})"
        exprs.append(f"{col}::{rtype} AS \"{name}\"")
    con.execute(f"CREATE OR REPLACE TEMP TABLE engine_out AS SELECT {', '.join(exprs)} FROM {src}")
    ok, text = compare_tables(con, ref_table, "engine_out", engine, ref, limit)
    if not ok and ties:
        ok, tie_text = compare_with_ties(con, ref_table, "engine_out", ties[1], ties[0], engine,
                                         ref)
        text = (f"OK ({tie_text})\n  (full rows: {text})" if ok
                else f"{text}\n  {tie_text}")
    con.execute("DROP TABLE IF EXISTS engine_out")
    return ok, text


def late_differences(con, ref_table, src, late_table, bids):
    """Of the rows in which an engine's output (src: DuckDB SQL reading it) and ref_table
    differ, how many no late bid explains. A row is explained when its probe (the first of
    `bids`, each a tuple of the row's columns that name a bid, positionally as BID_COLUMNS) is
    a late bid (in late_table), or when a row of that probe in either table names a late bid
    as another of its bids (the version it joined). Returns (rows that differ, unexplained)."""
    def names_late(alias, columns):
        same = " AND ".join(f'l."{b}" = {alias}."{c}"' for b, c in zip(BID_COLUMNS, columns))
        return f"EXISTS (SELECT 1 FROM {late_table} l WHERE {same})"

    probe = ", ".join(f'"{c}"' for c in bids[0])
    as_probe = ", ".join(f'"{b}" AS "{c}"' for b, c in zip(BID_COLUMNS, bids[0]))
    any_late = " OR ".join(names_late("t", columns) for columns in bids[1:]) or "false"
    con.execute(f"CREATE OR REPLACE TEMP TABLE engine_rows AS SELECT * FROM {src}")
    explained = " UNION ".join(
        [f"SELECT {as_probe} FROM {late_table}"]
        + [f"SELECT {probe} FROM {t} t WHERE {any_late}" for t in (ref_table, "engine_rows")])
    diff = (f"(SELECT * FROM {ref_table} EXCEPT ALL SELECT * FROM engine_rows) UNION ALL "
            f"(SELECT * FROM engine_rows EXCEPT ALL SELECT * FROM {ref_table})")
    same_probe = " AND ".join(f'x."{c}" = d."{c}"' for c in bids[0])
    n_diff, unexplained = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM ({explained}) x "
        f"WHERE {same_probe})) FROM ({diff}) d").fetchall()[0]
    con.execute("DROP TABLE IF EXISTS engine_rows")
    return n_diff, unexplained


def compare_tables(con, ref_table, table, engine, ref, limit=5):
    """Compares two tables of the same columns as multisets; returns (ok, text)."""
    cols = [c[0] for c in con.execute(f"DESCRIBE {ref_table}").fetchall()]
    order = ", ".join(str(i + 1) for i in range(len(cols)))
    missing_sql = f"SELECT * FROM {ref_table} EXCEPT ALL SELECT * FROM {table}"
    extra_sql = f"SELECT * FROM {table} EXCEPT ALL SELECT * FROM {ref_table}"
    n_missing = con.execute(f"SELECT count(*) FROM ({missing_sql})").fetchall()[0][0]
    n_extra = con.execute(f"SELECT count(*) FROM ({extra_sql})").fetchall()[0][0]
    n_out = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    n_ref = con.execute(f"SELECT count(*) FROM {ref_table}").fetchall()[0][0]
    if n_missing == 0 and n_extra == 0:
        return True, f"OK ({n_out:,} rows equal)"
    lines = [
        f"DIFFERENT: {engine} {n_out:,} rows, {ref} {n_ref:,} rows; "
        f"{n_missing:,} rows only in {ref}, {n_extra:,} rows only in {engine} "
        f"({', '.join(cols)})"
    ]
    sides = ((f"only in {ref}", missing_sql, n_missing), (f"only in {engine}", extra_sql, n_extra))
    for label, sql, n in sides:
        if n:
            rows = con.execute(f"SELECT * FROM ({sql}) ORDER BY {order} LIMIT {limit}").fetchall()
            lines.append(f"  first rows {label}:")
            lines.extend(f"    {r}" for r in rows)
    return False, "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Machine and report


def machine_info():
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = int(line.split()[1]) / 1024 / 1024
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram_gib": ram_gib}


def cpu_times():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def wait_quiet(limit_secs=30.0, busy_below=0.15):
    """Waits (up to limit_secs) until the CPUs were less than busy_below busy over one second:
    a timed run does not start while the previous one's processes (a JVM shutting down, a
    checker) still take the cores. Returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_secs:
        before = cpu_times()
        if before is None:
            return 0.0
        time.sleep(1.0)
        after = cpu_times()
        total = after[1] - before[1]
        if total > 0 and (after[0] - before[0]) / total < busy_below:
            break
    return time.perf_counter() - started


def loadavg():
    """The 1, 5 and 15 minute load averages, or None."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def stats(values):
    """min, median and max of the values that are not None, or None."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def fmt_stats(s):
    """`min` for one run, `min / median / max` for more."""
    if s is None:
        return "-"
    if s["n"] == 1:
        return f"{s['min']:.3f}"
    return f"{s['min']:.3f} / {s['median']:.3f} / {s['max']:.3f}"


def fmt_count(v):
    return "-" if v is None else f"{v:,}"


def markdown(results, header, parallelism, flink):
    flink_head = f" Flink p{parallelism} (s) | Flink/Weir |" if flink else ""
    # The timed parallelism-1 runs have a column of their own when the main runs are not at 1.
    p1 = parallelism != 1
    lines = [
        header,
        "",
        f"| query | format | Weir p{parallelism} (s) |" + (" Weir p1 (s) |" if p1 else "")
        + f" DuckDB (s) | DuckDB/Weir |{flink_head} Weir peak RSS (MB) | rows out | late rows "
        f"| DuckDB rows | load before, after | check |",
        "|---|---|---:|" + ("---:|" if p1 else "") + "---:|---:|" + ("---:|---:|" if flink else "")
        + "---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        weir = r["weir_stats"]
        duck = r["duckdb_stats"]
        ratio = f"{duck['min'] / weir['min']:.2f}" if duck and weir and weir["min"] else "-"
        rss = [x["peak_rss_bytes"] for x in r["weir"] if x["peak_rss_bytes"] is not None]
        rss = f"{max(rss) / 1e6:,.0f}" if rss else "-"
        ref = r["reference"] or {}
        load = "-"
        if r["load_before"] and r["load_after"]:
            load = f"{r['load_before'][0]:.2f}, {r['load_after'][0]:.2f}"
        checked = ",".join(str(c["parallelism"]) for c in r["checks"])
        check = ("OK" if r["ok"] else "FAIL") + (f" (p{checked})" if checked else "")
        flink_cells = ""
        if flink:
            fl = r["flink_stats"]
            fl_ratio = f"{fl['min'] / weir['min']:.2f}" if fl and weir and weir["min"] else "-"
            flink_cells = f" {fmt_stats(fl)} | {fl_ratio} |"
        lines.append(
            f"| {r['query']} | {r['format']} | {fmt_stats(weir)} |"
            + (f" {fmt_stats(r['weir_p1_stats'])} |" if p1 else "")
            + f" {fmt_stats(duck)} | {ratio} |{flink_cells} {rss} | {fmt_count(ref.get('rows'))} "
            f"| {fmt_count(ref.get('late_rows'))} | {fmt_count(r['duckdb_rows'])} | {load} "
            f"| {check} |"
        )
    lines += [
        "",
        "Times are min / median / max of the runs (one figure for one run); DuckDB/Weir is the "
        "ratio of the minimums (>= 1.0: Weir is at least as fast). Weir's are whole `weir run` "
        "processes (start-up, planning and exit included; the jobs' own `wall_time_secs` are in "
        "the JSON results), DuckDB's are `CREATE TEMP TABLE ... AS <query>` in one connection. "
        "rows out: the sequential reference's result rows, which Weir's sink rows must equal "
        "(for the queries with updating results, the rows of the final table; Weir's sink rows "
        "are its changes, at least as many); "
        "late rows: the rows the reference drops as late, which Weir's `dropped` must equal; "
        "DuckDB rows: DuckDB's batch result over every row, late or not (the speed reference, "
        "not checked against Weir). load: the 1-minute load average before and after the case. "
        "check: OK when Weir's output equalled the reference at every parallelism listed and "
        "every run's counts did.",
    ]
    if flink:
        lines += [
            "",
            "Flink's times are the INSERT's `execute_sql(...)` to the end of `wait()`: planning, "
            "the local mini cluster's start and the streaming job; the JVM's start and the "
            "TableEnvironment are not in them (the JSON results keep the whole process, "
            "`process_secs`, and the job's net runtime too). Flink/Weir >= 1.0 means Weir is at "
            "least as fast.",
        ]
    checks = []
    for r in results:
        for c in r["checks"]:
            checks.append(f"- {r['query']} / {r['format']}, Weir p{c['parallelism']}: {c['text']}")
        if r.get("reference_vs_duckdb"):
            checks.append(
                f"- {r['query']} / {r['format']}, the reference with no row late against "
                f"DuckDB: {r['reference_vs_duckdb']}"
            )
        for note in (r.get("reference") or {}).get("notes") or []:
            checks.append(f"- {r['query']} / {r['format']}, the reference: {note}")
        if flink and r.get("flink_check"):
            checks.append(f"- {r['query']} / {r['format']}, Flink p{parallelism}: "
                          f"{r['flink_check']}")
    if checks:
        lines += ["", "Checks:"] + checks
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Main


def csv_list(text, kind=str):
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    arg = p.add_argument
    arg("--rows", type=int, default=10_000_000, help="bids to generate (default 10,000,000)")
    arg("--runs", type=int, default=3, help="timed runs per engine and case (default 3)")
    arg("--queries", default=",".join(QUERIES),
        help=f"comma-separated, of {', '.join(QUERIES)} (default all)")
    arg("--formats", default=",".join(FORMATS),
        help="comma-separated, of csv, parquet, json (default all; json runs tumble only "
        "unless --all-formats)")
    arg("--all-formats", action="store_true",
        help="run every selected query on every selected format")
    arg("--data-dir", type=Path, default=ROOT / "bench-data" / "compare",
        help="where the bids files go (default bench-data/compare/ in the repository)")
    arg("--results", type=Path, default=None,
        help="JSON results file (default <data-dir>/results-<UTC time>.json)")
    arg("--threads", type=int, default=2, help="DuckDB threads (default 2)")
    arg("--parallelism", type=int, default=2,
        help="Weir's parallelism of the main (timed) runs, and Flink's (default 2)")
    arg("--check-parallelisms", default="1,4",
        help="more parallelisms at which Weir's output is checked against the reference "
        "(one untimed run each) on the --check-formats (default 1,4; '' for none)")
    arg("--check-formats", default="parquet",
        help="the formats checked at --check-parallelisms too (default parquet, the smallest "
        "file; 'all' for every format)")
    arg("--split-size", type=int, default=None,
        help="the bids table's 'split-size' in bytes (default: Weir's, 16 MiB of CSV and "
        "JSON lines, 4 MiB of Parquet row groups)")
    arg("--no-check", action="store_true",
        help="skip the checks of the output against the reference (the counts stay)")
    arg("--keep-work", action="store_true",
        help="keep the work directory (the rendered Weir and Flink scripts)")
    arg("--flink", action="store_true",
        help="also run every case in Flink SQL (PyFlink, streaming mode, parallelism as "
        "--parallelism; run.sh installs apache-flink when given this)")
    args = p.parse_args()
    if args.rows < 1 or args.runs < 1 or args.threads < 1 or args.parallelism < 1:
        p.error("--rows, --runs, --threads and --parallelism must be at least 1")
    if args.split_size is not None and args.split_size < 0:
        p.error("--split-size must be at least 0")
    args.queries = csv_list(args.queries)
    args.formats = csv_list(args.formats)
    try:
        args.check_parallelisms = csv_list(args.check_parallelisms, int)
    except ValueError:
        p.error("--check-parallelisms: comma-separated integers")
    if any(x < 1 for x in args.check_parallelisms):
        p.error("--check-parallelisms must be at least 1")
    args.check_formats = (list(FORMATS) if args.check_formats.strip() == "all"
                          else csv_list(args.check_formats))
    for x in args.queries:
        if x not in QUERIES:
            p.error(f"unknown query {x!r}: choose from {', '.join(QUERIES)}")
    for x in args.formats + args.check_formats:
        if x not in FORMATS:
            p.error(f"unknown format {x!r}: choose from {', '.join(FORMATS)}")
    return args


def run_case(con, args, weir_bin, work, data_dir, query, fmt, flink_jars, refs):
    """Runs one query on one format in every engine and checks; returns its record."""
    data_file = table_file(data_dir, "bids", fmt)
    record = {
        "query": query,
        "format": fmt,
        "description": QUERIES[query][2],
        "load_before": loadavg(),
        "load_after": None,
        "reference": None,
        "weir": [],
        "weir_p1": [],
        "weir_stats": None,
        "weir_p1_stats": None,
        "duckdb_secs": [],
        "duckdb_stats": None,
        "duckdb_rows": None,
        "reference_vs_duckdb": None,
        "checks": [],
        "ok": True,
        "messages": [],
    }
    if args.flink:
        record["flink"] = []
        record["flink_stats"] = None
        record["flink_check"] = None

    def fail(message):
        record["ok"] = False
        record["messages"].append(message)
        log(f"   FAIL: {message}")

    try:
        return run_case_inner(con, args, weir_bin, work, data_file, query, fmt, flink_jars, refs,
                              record, fail)
    finally:
        record["load_after"] = loadavg()
        record["weir_stats"] = stats(x["process_secs"] for x in record["weir"])
        record["weir_p1_stats"] = stats(x["process_secs"] for x in record["weir_p1"])
        record["duckdb_stats"] = stats(record["duckdb_secs"])
        if args.flink:
            record["flink_stats"] = stats(x["execute_secs"] for x in record["flink"])
        con.execute("DROP TABLE IF EXISTS r")


def run_case_inner(con, args, weir_bin, work, data_file, query, fmt, flink_jars, refs, record,
                   fail):
    # The reference: what Weir must produce, and how many rows it drops as late.
    ref_table, ref = refs.table(query)
    record["reference"] = dict(ref)

    # DuckDB: timed runs over every row (the speed reference).
    sql = string.Template((QUERY_DIR / f"{query}.duckdb.sql").read_text()).substitute(
        bids=duckdb_source(fmt, data_file),
        auctions=duckdb_source(fmt, table_file(data_file.parent, "auctions", fmt),
                               AUCTIONS_COLUMNS),
    )
    try:
        for _ in range(args.runs):
            con.execute("DROP TABLE IF EXISTS r")
            started = time.perf_counter()
            con.execute(f"CREATE TEMP TABLE r AS {sql}")
            record["duckdb_secs"].append(time.perf_counter() - started)
        record["duckdb_rows"] = con.execute("SELECT count(*) FROM r").fetchall()[0][0]
        times = ", ".join(f"{s:.3f}" for s in record["duckdb_secs"])
        log(f"   duckdb: {times} s, {record['duckdb_rows']:,} rows (every row, none late)")
        # The reference's windows over every row must be DuckDB's result: a check of the
        # reference's windows and aggregates that leaves only its lateness to trust.
        if not args.no_check and not refs.checked_against_duckdb.get(query):
            all_rows = refs.without_lateness(query)
            ok, text = compare_tables(con, "r", all_rows, "the reference", "DuckDB")
            con.execute(f"DROP TABLE IF EXISTS {all_rows}")
            record["reference_vs_duckdb"] = text
            refs.checked_against_duckdb[query] = True
            log(f"   reference with no row late against DuckDB: {text}")
            if not ok:
                fail(f"the reference with no row late differs from DuckDB: {text}")
    except duckdb.Error as e:
        fail(f"DuckDB query queries/{query}.duckdb.sql failed: {e}")

    # The sources' rows: the bids, and the auctions where the query joins them.
    source_rows = args.rows + (AUCTIONS_ROWS if REFERENCE[query].get("table") else 0)

    updating = REFERENCE[query].get("updating", False)
    ties = None
    if ref.get("alternatives"):
        ties = (REFERENCE[query]["ties"], ref["alternatives"])

    def counts(run, what):
        # An updating query's sink rows are its changes, at least one per row of the final
        # table (how many depends on how the rows were batched).
        if updating and run["sink_rows"] < ref["rows"]:
            fail(f"{what}: sink_rows {run['sink_rows']:,} changes, fewer than the reference's "
                 f"{ref['rows']:,} rows")
        elif not updating and run["sink_rows"] != ref["rows"]:
            fail(f"{what}: sink_rows {run['sink_rows']:,}, the reference {ref['rows']:,} rows")
        if run["source_rows"] != source_rows:
            fail(f"{what}: source_rows {run['source_rows']:,}, generated {source_rows:,}")
        if run["dropped"] != ref["late_rows"]:
            fail(f"{what}: dropped {run['dropped']:,} rows as late, the reference "
                 f"{ref['late_rows']:,}")

    # Weir: timed runs into the blackhole sink.
    script = weir_script(query, fmt, data_file, "'connector' = 'blackhole'",
                         work / f"{query}-{fmt}-blackhole.sql", args.split_size)
    parallelisms = [(args.parallelism, "weir")]
    if fmt in QUERIES[query][1] and args.parallelism != 1:
        parallelisms.append((1, "weir_p1"))
    for parallelism, key in parallelisms:
        for _ in range(args.runs):
            try:
                wait_quiet()
                run = run_weir(weir_bin, script, parallelism)
            except RuntimeError as e:
                fail(f"weir -p {parallelism}: {e}")
                break
            record[key].append(run)
            log(
                f"   weir -p {parallelism}: {run['process_secs']:.3f} s "
                f"(job {run['wall_time_secs']:.3f} s), {run['sink_rows']:,} sink rows, "
                f"{run['dropped']:,} dropped"
            )
            counts(run, f"weir -p {parallelism}")

    # Checks: at every parallelism the case runs, and at --check-parallelisms on the
    # --check-formats, Weir writes Parquet, compared with the reference's table.
    checked = [p for p, _ in parallelisms]
    if fmt in args.check_formats:
        checked += args.check_parallelisms
    checked = list(dict.fromkeys(checked))
    if args.no_check:
        checked = []
    for parallelism in checked:
        out = work / f"out-{query}-{fmt}-p{parallelism}"
        # Updating results go to a table that takes changes; compare.py materializes them.
        sink = (f"'connector' = 'filesystem', 'path' = {q(out)}, 'format' = "
                + ("'changelog-json'" if updating else "'parquet'"))
        script = weir_script(query, fmt, data_file, sink,
                             work / f"{query}-{fmt}-check.sql", args.split_size)
        check = {"parallelism": parallelism, "ok": False, "text": None, "sink_rows": None,
                 "dropped": None}
        record["checks"].append(check)
        try:
            run = run_weir(weir_bin, script, parallelism)
            check["sink_rows"], check["dropped"] = run["sink_rows"], run["dropped"]
            if updating:
                src, changes, summary, problems = materialize_changes(con, out, ref_table)
                ok, text = compare_results(con, ref_table, src, ties=ties)
                text += f"; materialized from {summary}"
                if changes != run["sink_rows"]:
                    problems.append(f"{changes:,} changes in the files, sink_rows "
                                    f"{run['sink_rows']:,}")
                if problems:
                    ok = False
                    text += "; " + "; ".join(problems)
                if src:
                    con.execute(f"DROP TABLE IF EXISTS {src}")
            else:
                ok, text = compare_results(con, ref_table, weir_source(out))
            if run["dropped"] != ref["late_rows"]:
                ok = False
                text += (f"; dropped {run['dropped']:,} rows as late, the reference "
                         f"{ref['late_rows']:,}")
            check["ok"], check["text"] = ok, text
            log(f"   check -p {parallelism}: {text}")
            if not ok:
                fail(f"check -p {parallelism}: {text}")
        except RuntimeError as e:
            check["text"] = f"run failed: {e}"
            fail(f"check run -p {parallelism}: {e}")
        except duckdb.Error as e:
            check["text"] = f"reading Weir's output failed: {e}"
            fail(f"check -p {parallelism}: reading Weir's output failed: {e}")
        shutil.rmtree(out, ignore_errors=True)
    if args.flink:
        run_flink_case(con, args, work, data_file, query, fmt, flink_jars, record, fail, refs)
    return record


def run_flink_case(con, args, work, data_file, query, fmt, flink_jars, record, fail, refs):
    """Flink's timed runs (blackhole sink) and check (CSV files) of one query and format."""
    jars = flink_jars if fmt == "parquet" else []
    auctions_file = table_file(data_file.parent, "auctions", fmt)
    script = flink_runner.flink_script(
        query, fmt, data_file, auctions_file, "'connector' = 'blackhole'",
        work / f"{query}-{fmt}-blackhole.flink.sql",
    )
    for _ in range(args.runs):
        try:
            wait_quiet()
            run = flink_runner.run_flink(script, args.parallelism, jars)
        except RuntimeError as e:
            fail(f"flink: {e}")
            break
        run.pop("columns", None)
        run["parallelism"] = args.parallelism
        record["flink"].append(run)
        log(
            f"   flink -p {args.parallelism}: {run['execute_secs']:.3f} s "
            f"(process {run['process_secs']:.3f} s, net runtime {run['net_runtime_secs']:.3f} s)"
        )
    if args.no_check:
        record["flink_check"] = "skipped"
        return
    if REFERENCE[query].get("updating"):
        run_flink_batch_check(con, args, work, data_file, auctions_file, query, fmt, jars,
                              record, fail, refs)
        return
    # The check run emits Flink's watermark on every advance (pipeline.auto-watermark-interval
    # 0: no processing-time timer), so which rows are late depends on the rows alone; the
    # reference is computed with the same emission (interval 0 ms).
    ref_table, ref = refs.table(query, interval_ms=flink_runner.CHECK_WATERMARK_INTERVAL_MS)
    record["flink_reference"] = dict(ref)
    out = work / f"flink-out-{query}-{fmt}"
    sink = f"'connector' = 'filesystem', 'path' = {q(out)}, 'format' = 'csv'"
    script = flink_runner.flink_script(
        query, fmt, data_file, auctions_file, sink, work / f"{query}-{fmt}-check.flink.sql"
    )
    # Flink at parallelism 1 reads the file in order, as the reference does; above 1 its
    # subtasks read parts of the file side by side and which rows are late depends on timing,
    # so differences are shown, not failed.
    must_equal = args.parallelism == 1
    try:
        run = flink_runner.run_flink(
            script, args.parallelism, jars,
            watermark_interval_ms=flink_runner.CHECK_WATERMARK_INTERVAL_MS,
        )
        src = flink_runner.check_source(out, run["columns"])
        ok, text = compare_results(con, ref_table, src, engine="Flink")
        if query in FLINK_LATE_RULES:
            # The difference under Weir's late rule is shown; the one that counts is under
            # Flink's own rule.
            rule_table, rule_ref = refs.table(
                query, interval_ms=flink_runner.CHECK_WATERMARK_INTERVAL_MS,
                late_rule=FLINK_LATE_RULES[query])
            record["flink_rule_reference"] = dict(rule_ref)
            ok, rule_text = compare_results(con, rule_table, src, engine="Flink",
                                            ref="the reference under Flink's late rule")
            bids = REFERENCE[query].get("bids")
            if not ok and bids:
                # Which versions a late bid meets in Flink depends on how its two inputs
                # interleave (timing), which the rule's model takes in step: the differences
                # that count are those no late bid explains.
                n_diff, unexplained = late_differences(
                    con, rule_table, src,
                    refs.late_bids(flink_runner.CHECK_WATERMARK_INTERVAL_MS), bids)
                ok = unexplained == 0
                rule_text += (f"\n  {n_diff - unexplained:,} of the {n_diff:,} rows that differ "
                              "have a late bid as the probe, or as the version of that probe in "
                              "either result (timing: how Flink's two inputs interleave); "
                              f"{unexplained:,} have none")
            text = (f"against the reference under Weir's late rule: {text}\n  against the "
                    f"reference under Flink's late rule: {rule_text}")
        if not ok and not must_equal:
            text += f" (not a failure: Flink at parallelism {args.parallelism})"
        record["flink_check"] = text
        log(f"   flink check: {text}")
        if not ok and must_equal:
            fail(f"flink check: {text}")
    except RuntimeError as e:
        fail(f"flink check run: {e}")
    except duckdb.Error as e:
        fail(f"flink check: reading Flink's output failed: {e}")
    shutil.rmtree(out, ignore_errors=True)


def run_flink_batch_check(con, args, work, data_file, auctions_file, query, fmt, jars, record,
                          fail, refs):
    """The check of a query with updating results in Flink: Flink's filesystem sink takes
    inserts only, so the check runs the same script in Flink's batch runtime mode, whose
    result is the final table of the streaming job's changes (nothing is late in these
    queries: the watermark plays no part), written as CSV and compared with the reference.
    The final table depends on the rows alone, so a difference fails at any parallelism."""
    ref_table, ref = refs.table(query)
    record["flink_reference"] = dict(ref)
    ties = None
    if ref.get("alternatives"):
        ties = (REFERENCE[query]["ties"], ref["alternatives"])
    out = work / f"flink-out-{query}-{fmt}"
    sink = f"'connector' = 'filesystem', 'path' = {q(out)}, 'format' = 'csv'"
    script = flink_runner.flink_script(
        query, fmt, data_file, auctions_file, sink, work / f"{query}-{fmt}-check.flink.sql"
    )
    try:
        run = flink_runner.run_flink(script, args.parallelism, jars, batch=True)
        src = flink_runner.check_source(out, run["columns"])
        ok, text = compare_results(con, ref_table, src, engine="Flink", ties=ties)
        text = f"batch mode: {text}"
        record["flink_check"] = text
        log(f"   flink check: {text}")
        if not ok:
            fail(f"flink check: {text}")
    except RuntimeError as e:
        fail(f"flink check run: {e}")
    except duckdb.Error as e:
        fail(f"flink check: reading Flink's output failed: {e}")
    shutil.rmtree(out, ignore_errors=True)


def main():
    args = parse_args()
    check_reference_specs()
    weir_bin = Path(os.environ.get("WEIR_BIN", "target/release/weir")).absolute()
    if not os.access(weir_bin, os.X_OK):
        sys.exit(
            f"compare: no Weir binary at {weir_bin}: build it with "
            "`cargo build --release -p weir-cli` (from the repository root) or set WEIR_BIN"
        )
    try:
        version = subprocess.run(
            [str(weir_bin), "--version"], capture_output=True, text=True, check=True
        )
        weir_version = version.stdout.strip() or "unknown version"
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"compare: {weir_bin} --version failed: {e}")
    data_dir = args.data_dir.absolute()
    cases = [
        (query, fmt)
        for query in args.queries
        for fmt in args.formats
        if args.all_formats or fmt in QUERIES[query][0]
    ]
    if not cases:
        sys.exit("compare: the selected queries and formats give nothing to run (--all-formats?)")
    flink_version = java = None
    flink_jars = []
    if args.flink:
        flink_version = flink_runner.flink_version()
        if flink_version is None:
            sys.exit(
                "compare: --flink needs apache-flink in this Python: start the script with "
                "scripts/compare/run.sh --flink, which installs it"
            )
        java = flink_runner.java_version()
        if java is None:
            sys.exit("compare: --flink needs Java (PyFlink starts `java`: JAVA_HOME or PATH)")
        jar_dir = flink_runner.jar_dir(flink_version)
        if any(fmt == "parquet" for _, fmt in cases):
            flink_jars, missing = flink_runner.parquet_jars(jar_dir)
            if missing:
                sys.exit(
                    f"compare: Flink's Parquet runs need {', '.join(missing)} in {jar_dir}: "
                    "scripts/compare/run.sh --flink fetches them with mvn (install Maven), or "
                    "leave Parquet out (--formats csv,json)"
                )

    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    # The progress bar would fill the log with carriage-return lines during generation.
    con.execute("SET enable_progress_bar = false")
    generate(con, data_dir, args.rows)

    # The reference reads the rows in file order (from the Parquet file; every format holds
    # the same rows in the same order, which is checked for each format that runs).
    started = time.perf_counter()
    rows = load_rows(con, "parquet", table_file(data_dir, "bids", "parquet"))
    for fmt in dict.fromkeys(f for _, f in cases):
        path = table_file(data_dir, "bids", fmt)
        if fmt != "parquet" and not same_order(con, fmt, path, rows["date_time"]):
            sys.exit(f"compare: {path.name} does not hold the rows of bids.parquet in the same "
                     "order: delete the data directory and run again")
    tables = {"auctions": load_table(con, table_file(data_dir, "auctions", "parquet"),
                                     AUCTIONS_COLUMNS)}
    bids_sql = (QUERY_DIR / "bids.weir.sql").read_text()
    delay_ms, interval_ms = reference.watermark_spec(bids_sql)
    refs = References(con, rows, tables, delay_ms, interval_ms)
    out_of_order = reference.out_of_order(rows["date_time"])
    log(f"data: {out_of_order:,} of {args.rows:,} rows come after a later event time "
        f"(read in {time.perf_counter() - started:.1f} s)")

    machine = machine_info()
    ram = f"{machine['ram_gib']:.1f} GiB" if machine["ram_gib"] else "unknown"
    header = (
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {ram} RAM; "
        f"Weir: {weir_bin} ({weir_version}); DuckDB {duckdb.__version__} "
        f"(threads = {args.threads}); {args.rows:,} bids, {out_of_order:,} of them out of "
        f"order (generator {GENERATOR_VERSION}); watermark {delay_ms} ms behind, emitted every "
        f"{interval_ms} ms of event time; {args.runs} run(s) each"
    )
    if args.split_size is not None:
        header += f"; Weir's split-size {args.split_size:,} bytes"
    if args.flink:
        header += (
            f"; Flink {flink_version} (PyFlink, streaming mode, parallelism {args.parallelism}, "
            f"{java})"
        )
    work = Path(tempfile.mkdtemp(prefix="weir-compare-"))
    log(f"work directory: {work}")
    results = []
    try:
        for n, (query, fmt) in enumerate(cases):
            log(f"== {query} / {fmt}")
            results.append(
                run_case(con, args, weir_bin, work, data_dir, query, fmt, flink_jars, refs)
            )
            if n + 1 == len(cases) or cases[n + 1][0] != query:
                refs.drop(query)
    finally:
        if args.keep_work:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print(markdown(results, header, args.parallelism, args.flink))
    failures = [(r["query"], r["format"], m) for r in results for m in r["messages"]]
    if failures:
        print("\nFailures:")
        for query, fmt, message in failures:
            print(f"- {query} / {fmt}: {message}")

    now = datetime.datetime.now(datetime.timezone.utc)
    results_path = args.results or data_dir / f"results-{now:%Y%m%dT%H%M%SZ}.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "machine": machine,
        "weir_bin": str(weir_bin),
        "weir_version": weir_version,
        "duckdb_version": duckdb.__version__,
        "duckdb_threads": args.threads,
        "weir_parallelism": args.parallelism,
        "check_parallelisms": args.check_parallelisms,
        "check_formats": args.check_formats,
        "split_size": args.split_size,
        "rows": args.rows,
        "out_of_order_rows": out_of_order,
        "watermark_delay_ms": delay_ms,
        "watermark_interval_ms": interval_ms,
        "runs": args.runs,
        "generator_version": GENERATOR_VERSION,
        "time_utc": now.isoformat(timespec="seconds"),
        "header": header,
        "results": results,
    }
    if args.flink:
        summary["flink_version"] = flink_version
        summary["flink_parallelism"] = args.parallelism
        summary["flink_java"] = java
        summary["flink_jars"] = [str(j) for j in flink_jars]
    results_path.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nResults: {results_path}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
