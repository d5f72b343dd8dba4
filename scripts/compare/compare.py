#!/usr/bin/env python3
"""Weir against DuckDB on the same bids data (scripts/compare/README.md).

Generates the bids data with DuckDB (once per row count), runs every selected query and format
in Weir (`weir run --json` into the blackhole sink), in DuckDB (materialized into a temp table)
and, with --flink, in Flink SQL (PyFlink, flink_runner.py), checks Weir's and Flink's results
against DuckDB's, prints a Markdown table and writes the same as JSON. Started by
scripts/compare/run.sh, which provides a Python with duckdb (and apache-flink for --flink).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

import flink_runner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
QUERY_DIR = HERE / "queries"

# Bump when the generated data changes: existing data with another version is regenerated.
GENERATOR_VERSION = 1
PARQUET_ROW_GROUP = 122_880
FORMATS = ("csv", "parquet", "json")
FILE_NAMES = {"csv": "bids.csv", "parquet": "bids.parquet", "json": "bids.jsonl"}

# name -> (formats run by default, parallelism-1 runs on these formats, description)
QUERIES = {
    "tumble": (("csv", "parquet", "json"), ("csv", "parquet"), "tumble 10 s per auction"),
    "hop10": (("csv", "parquet"), (), "hop size 10 s slide 2 s per auction"),
    "hop5": (("csv", "parquet"), (), "hop size 5 s slide 2 s per auction"),
    "session": (("csv", "parquet"), (), "session gap 3 s per bidder"),
    "filter": (("csv", "parquet"), ("csv", "parquet"), "filter price > 90000 + project"),
}

BIDS_COLUMNS = {
    "auction": "BIGINT",
    "bidder": "BIGINT",
    "price": "BIGINT",
    "channel": "VARCHAR",
    "url": "VARCHAR",
    "date_time": "BIGINT",
    "extra": "VARCHAR",
}

# A 32-bit integer hash made of UBIGINT arithmetic only (products of two values below 2^32
# stay below 2^64), so the data depend on nothing but this text and the row count.
HASH_MACROS = """
CREATE OR REPLACE TEMP MACRO mul32(x, m) AS (x * m::UBIGINT) % 4294967296::UBIGINT;
CREATE OR REPLACE TEMP MACRO xs(x, s) AS xor(x, x >> s);
CREATE OR REPLACE TEMP MACRO h32(i, seed) AS
  xs(mul32(xs(mul32(xs(mul32((i::UBIGINT + seed::UBIGINT * 1000003) % 4294967296::UBIGINT,
      2654435761), 16), 2246822519), 13), 3266489917), 16)::BIGINT;
"""

BIDS_SELECT = """
SELECT
  1000 + h32(i, 1) % 10000 AS auction,
  1000 + h32(i, 2) % 2000 AS bidder,
  1 + h32(i, 3) % 100000 AS price,
  ['Google', 'Facebook', 'Baidu', 'Apple'][1 + h32(i, 4) % 4] AS channel,
  'https://www.nexmark.com/item.htm?id=' || lpad((h32(i, 5) % 100000)::VARCHAR, 5, '0') AS url,
  1700000000000 + i AS date_time,
  'x' || (h32(i, 6) % 1000)::VARCHAR AS extra
FROM range({rows}) t(i)
ORDER BY date_time
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def q(path):
    """A path as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


# ---------------------------------------------------------------------------------------------
# Data


def generate(con, data_dir, rows):
    """Writes bids.csv, bids.parquet and bids.jsonl into data_dir unless its stamp matches."""
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp_path = data_dir / "stamp.json"
    stamp = {"rows": rows, "generator": GENERATOR_VERSION}
    files = [data_dir / name for name in FILE_NAMES.values()]
    if stamp_path.exists() and all(f.exists() for f in files):
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                log(f"data: reusing {data_dir} ({rows:,} rows)")
                return
        except ValueError:
            pass
    stamp_path.unlink(missing_ok=True)
    log(f"data: generating {rows:,} bids into {data_dir}")
    started = time.perf_counter()
    con.execute(HASH_MACROS)
    select = BIDS_SELECT.format(rows=int(rows))
    copies = {
        "csv": "(FORMAT CSV, HEADER true, DELIMITER ',')",
        "parquet": f"(FORMAT PARQUET, ROW_GROUP_SIZE {PARQUET_ROW_GROUP})",
        "json": "(FORMAT JSON)",
    }
    for fmt, options in copies.items():
        final = data_dir / FILE_NAMES[fmt]
        partial = data_dir / (FILE_NAMES[fmt] + ".partial")
        con.execute(f"COPY ({select}) TO {q(partial)} {options}")
        os.replace(partial, final)
        log(f"data:   {final.name}: {final.stat().st_size / 1e6:,.1f} MB")
    stamp_path.write_text(json.dumps(stamp) + "\n")
    log(f"data: generated in {time.perf_counter() - started:.1f} s")


def duckdb_source(fmt, path):
    """The DuckDB table function reading the bids file of one format."""
    columns = "{" + ", ".join(f"'{c}': '{t}'" for c, t in BIDS_COLUMNS.items()) + "}"
    if fmt == "csv":
        return f"read_csv({q(path)}, header = true, auto_detect = false, columns = {columns})"
    if fmt == "parquet":
        return f"read_parquet({q(path)})"
    return f"read_json({q(path)}, format = 'newline_delimited', columns = {columns})"


# ---------------------------------------------------------------------------------------------
# Weir


def weir_script(query, fmt, data_file, sink_options, out_path):
    bids = string.Template((QUERY_DIR / "bids.weir.sql").read_text()).substitute(
        bids_path=str(data_file), bids_format=fmt
    )
    body = string.Template((QUERY_DIR / f"{query}.weir.sql").read_text()).substitute(
        sink_options=sink_options
    )
    out_path.write_text(bids + "\n" + body)
    return out_path


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
    return {
        "process_secs": elapsed,
        "wall_time_secs": summary.get("wall_time_secs"),
        "source_rows": summary.get("source_rows"),
        "sink_rows": summary.get("sink_rows"),
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


def compare_results(con, ref_table, src, engine="Weir", limit=5):
    """Compares an engine's output (src: DuckDB SQL reading it, None when it wrote nothing) with
    DuckDB's table as multisets; returns (ok, text)."""
    ref_cols = con.execute(f"DESCRIBE {ref_table}").fetchall()
    if src is None:
        ref_rows = con.execute(f"SELECT count(*) FROM {ref_table}").fetchone()[0]
        if ref_rows == 0:
            return True, "OK (both empty)"
        return False, f"{engine} wrote no rows, DuckDB has {ref_rows:,}"
    out_cols = con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()
    if [c[0] for c in out_cols] != [c[0] for c in ref_cols]:
        return False, (
            f"columns differ: {engine} {[c[0] for c in out_cols]}, "
            f"DuckDB {[c[0] for c in ref_cols]}"
        )
    # Window bounds (TIMESTAMP(3)) as epoch milliseconds, everything as DuckDB's types.
    exprs = []
    for (name, wtype, *_), (_, rtype, *_) in zip(out_cols, ref_cols):
        col = f'"{name}"'
        if wtype.startswith("TIMESTAMP"):
            col = f"epoch_ms({col})"
        exprs.append(f"{col}::{rtype} AS \"{name}\"")
    con.execute(f"CREATE OR REPLACE TEMP TABLE engine_out AS SELECT {', '.join(exprs)} FROM {src}")
    order = ", ".join(str(i + 1) for i in range(len(ref_cols)))
    missing_sql = f"SELECT * FROM {ref_table} EXCEPT ALL SELECT * FROM engine_out"
    extra_sql = f"SELECT * FROM engine_out EXCEPT ALL SELECT * FROM {ref_table}"
    n_missing = con.execute(f"SELECT count(*) FROM ({missing_sql})").fetchone()[0]
    n_extra = con.execute(f"SELECT count(*) FROM ({extra_sql})").fetchone()[0]
    n_out = con.execute("SELECT count(*) FROM engine_out").fetchone()[0]
    n_ref = con.execute(f"SELECT count(*) FROM {ref_table}").fetchone()[0]
    if n_missing == 0 and n_extra == 0:
        con.execute("DROP TABLE engine_out")
        return True, f"OK ({n_out:,} rows equal)"
    names = ", ".join(c[0] for c in ref_cols)
    lines = [
        f"DIFFERENT: {engine} {n_out:,} rows, DuckDB {n_ref:,} rows; "
        f"{n_missing:,} rows only in DuckDB, {n_extra:,} rows only in {engine} ({names})"
    ]
    sides = (("only in DuckDB", missing_sql, n_missing), (f"only in {engine}", extra_sql, n_extra))
    for label, sql, n in sides:
        if n:
            rows = con.execute(f"SELECT * FROM ({sql}) ORDER BY {order} LIMIT {limit}").fetchall()
            lines.append(f"  first rows {label}:")
            lines.extend(f"    {r}" for r in rows)
    con.execute("DROP TABLE IF EXISTS engine_out")
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


def best(values):
    values = [v for v in values if v is not None]
    return min(values) if values else None


def fmt_secs(v):
    return "-" if v is None else f"{v:.3f}"


def markdown(results, header, parallelism, flink):
    flink_head = f" Flink p{parallelism} best (s) | Flink/Weir |" if flink else ""
    lines = [
        header,
        "",
        f"| query | format | Weir p{parallelism} best (s) | Weir p1 best (s) | DuckDB best (s) "
        f"| DuckDB/Weir |{flink_head} Weir peak RSS (MB) | rows out | check |",
        "|---|---|---:|---:|---:|---:|" + ("---:|---:|" if flink else "") + "---:|---:|---|",
    ]
    for r in results:
        weir = best(x["process_secs"] for x in r["weir"])
        weir_p1 = best(x["process_secs"] for x in r["weir_p1"])
        duck = best(r["duckdb_secs"])
        ratio = f"{duck / weir:.2f}" if duck is not None and weir else "-"
        rss = [x["peak_rss_bytes"] for x in r["weir"] if x["peak_rss_bytes"] is not None]
        rss = f"{max(rss) / 1e6:,.0f}" if rss else "-"
        rows = "-" if r["duckdb_rows"] is None else f"{r['duckdb_rows']:,}"
        check = "OK" if r["ok"] else "FAIL"
        flink_cells = ""
        if flink:
            fl = best(x["execute_secs"] for x in r["flink"])
            fl_ratio = f"{fl / weir:.2f}" if fl is not None and weir else "-"
            flink_cells = f" {fmt_secs(fl)} | {fl_ratio} |"
        lines.append(
            f"| {r['query']} | {r['format']} | {fmt_secs(weir)} | {fmt_secs(weir_p1)} "
            f"| {fmt_secs(duck)} | {ratio} |{flink_cells} {rss} | {rows} | {check} |"
        )
    lines += [
        "",
        "Times are the best of the runs; Weir's are whole `weir run` processes (start-up, planning "
        "and exit included; the jobs' own `wall_time_secs` are in the JSON results), DuckDB's "
        "are `CREATE TEMP TABLE ... AS <query>` in one connection. DuckDB/Weir >= 1.0 means "
        "Weir is at least as fast. rows out: DuckDB's result rows (Weir's sink rows must equal "
        "them).",
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
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Main


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
        help="Weir's parallelism of the main runs (default 2)")
    arg("--no-check", action="store_true", help="skip the correctness checks")
    arg("--keep-work", action="store_true",
        help="keep the work directory (the rendered Weir and Flink scripts)")
    arg("--flink", action="store_true",
        help="also run every case in Flink SQL (PyFlink, streaming mode, parallelism as "
        "--parallelism; run.sh installs apache-flink when given this)")
    args = p.parse_args()
    if args.rows < 1 or args.runs < 1 or args.threads < 1 or args.parallelism < 1:
        p.error("--rows, --runs, --threads and --parallelism must be at least 1")
    args.queries = [x.strip() for x in args.queries.split(",") if x.strip()]
    args.formats = [x.strip() for x in args.formats.split(",") if x.strip()]
    for x in args.queries:
        if x not in QUERIES:
            p.error(f"unknown query {x!r}: choose from {', '.join(QUERIES)}")
    for x in args.formats:
        if x not in FORMATS:
            p.error(f"unknown format {x!r}: choose from {', '.join(FORMATS)}")
    return args


def run_case(con, args, weir_bin, work, data_dir, query, fmt, flink_jars):
    """Runs one query on one format in every engine and checks; returns its record."""
    data_file = data_dir / FILE_NAMES[fmt]
    record = {
        "query": query,
        "format": fmt,
        "description": QUERIES[query][2],
        "weir": [],
        "weir_p1": [],
        "duckdb_secs": [],
        "duckdb_rows": None,
        "check": None,
        "ok": True,
        "messages": [],
    }
    if args.flink:
        record["flink"] = []
        record["flink_check"] = None

    def fail(message):
        record["ok"] = False
        record["messages"].append(message)
        log(f"   FAIL: {message}")

    # DuckDB: timed runs; the last one's table is the reference of the check.
    sql = string.Template((QUERY_DIR / f"{query}.duckdb.sql").read_text()).substitute(
        bids=duckdb_source(fmt, data_file)
    )
    try:
        for _ in range(args.runs):
            con.execute("DROP TABLE IF EXISTS r")
            started = time.perf_counter()
            con.execute(f"CREATE TEMP TABLE r AS {sql}")
            record["duckdb_secs"].append(time.perf_counter() - started)
    except duckdb.Error as e:
        fail(f"DuckDB query queries/{query}.duckdb.sql failed: {e}")
        return record
    record["duckdb_rows"] = con.execute("SELECT count(*) FROM r").fetchone()[0]
    times = ", ".join(f"{s:.3f}" for s in record["duckdb_secs"])
    log(f"   duckdb: {times} s, {record['duckdb_rows']:,} rows")

    # Weir: timed runs into the blackhole sink.
    script = weir_script(
        query, fmt, data_file, "'connector' = 'blackhole'", work / f"{query}-{fmt}-blackhole.sql"
    )
    parallelisms = [(args.parallelism, "weir")]
    if fmt in QUERIES[query][1] and args.parallelism != 1:
        parallelisms.append((1, "weir_p1"))
    for parallelism, key in parallelisms:
        for _ in range(args.runs):
            try:
                run = run_weir(weir_bin, script, parallelism)
            except RuntimeError as e:
                fail(f"weir -p {parallelism}: {e}")
                break
            run["parallelism"] = parallelism
            record[key].append(run)
            log(
                f"   weir -p {parallelism}: {run['process_secs']:.3f} s "
                f"(job {run['wall_time_secs']:.3f} s), {run['sink_rows']:,} sink rows"
            )
            if run["sink_rows"] != record["duckdb_rows"]:
                fail(
                    f"weir -p {parallelism}: sink_rows {run['sink_rows']:,}, "
                    f"DuckDB {record['duckdb_rows']:,} rows"
                )
            if run["source_rows"] != args.rows:
                fail(
                    f"weir -p {parallelism}: source_rows {run['source_rows']:,}, "
                    f"generated {args.rows:,}"
                )

    # Check: Weir writes Parquet, compared with DuckDB's table.
    if args.no_check:
        record["check"] = "skipped"
    else:
        out = work / f"out-{query}-{fmt}"
        sink = f"'connector' = 'filesystem', 'path' = {q(out)}, 'format' = 'parquet'"
        script = weir_script(query, fmt, data_file, sink, work / f"{query}-{fmt}-check.sql")
        try:
            run_weir(weir_bin, script, args.parallelism)
            ok, text = compare_results(con, "r", weir_source(out))
            record["check"] = text
            log(f"   check: {text}")
            if not ok:
                fail(f"check: {text}")
        except RuntimeError as e:
            fail(f"check run: {e}")
        except duckdb.Error as e:
            fail(f"check: reading Weir's output failed: {e}")
        shutil.rmtree(out, ignore_errors=True)
    if args.flink:
        run_flink_case(con, args, work, data_file, query, fmt, flink_jars, record, fail)
    con.execute("DROP TABLE IF EXISTS r")
    return record


def run_flink_case(con, args, work, data_file, query, fmt, flink_jars, record, fail):
    """Flink's timed runs (blackhole sink) and check (CSV files) of one query and format."""
    jars = flink_jars if fmt == "parquet" else []
    script = flink_runner.flink_script(
        query, fmt, data_file, "'connector' = 'blackhole'",
        work / f"{query}-{fmt}-blackhole.flink.sql",
    )
    for _ in range(args.runs):
        try:
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
    out = work / f"flink-out-{query}-{fmt}"
    sink = f"'connector' = 'filesystem', 'path' = {q(out)}, 'format' = 'csv'"
    script = flink_runner.flink_script(
        query, fmt, data_file, sink, work / f"{query}-{fmt}-check.flink.sql"
    )
    try:
        run = flink_runner.run_flink(script, args.parallelism, jars)
        src = flink_runner.check_source(out, run["columns"])
        ok, text = compare_results(con, "r", src, engine="Flink")
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

    machine = machine_info()
    ram = f"{machine['ram_gib']:.1f} GiB" if machine["ram_gib"] else "unknown"
    header = (
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {ram} RAM; "
        f"Weir: {weir_bin} ({weir_version}); DuckDB {duckdb.__version__} "
        f"(threads = {args.threads}); {args.rows:,} bids; best of {args.runs} runs"
    )
    if args.flink:
        header += (
            f"; Flink {flink_version} (PyFlink, streaming mode, parallelism {args.parallelism}, "
            f"{java})"
        )
    work = Path(tempfile.mkdtemp(prefix="weir-compare-"))
    log(f"work directory: {work}")
    results = []
    try:
        for query, fmt in cases:
            log(f"== {query} / {fmt}")
            results.append(
                run_case(con, args, weir_bin, work, data_dir, query, fmt, flink_jars)
            )
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
        "rows": args.rows,
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
