#!/usr/bin/env python3
"""The Flink side of scripts/compare (scripts/compare/README.md, `--flink`).

Imported by compare.py, which renders one Flink SQL script per query, format and sink
(`flink_script`) and runs it with `run_flink`: each run is a fresh Python process running this
file as a script, which starts PyFlink's local JVM, creates a streaming TableEnvironment (a
batch one with --batch), runs the script's statements and times the last one (the INSERT) from
`execute_sql` to the end of `wait()`. It prints one JSON line with the times, the job's net
runtime and the sink table's columns. Importing this module needs no PyFlink; running it as a
script does.
"""

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import templates

# Format options of the bids table per format. Flink's CSV format (2.3) cannot skip a header
# line, so for CSV the header becomes a row of NULLs that the `bids` view drops
# (queries/bids.flink.sql).
FORMAT_OPTIONS = {
    "csv": ",\n  'csv.ignore-parse-errors' = 'true'",
    "parquet": "",
    "json": "",
}

# The jars Flink needs to read Parquet and that PyFlink does not ship: run.sh fetches them from
# Maven Central with mvn (`mvn dependency:copy`) into COMPARE_FLINK_JARS. Hadoop's client jars
# (its Configuration class) and snappy-java (the data's Snappy pages) are what flink-sql-parquet
# leaves to the installation.
PARQUET_JAR_PREFIXES = ("flink-sql-parquet-", "hadoop-client-api-", "hadoop-client-runtime-",
                        "snappy-java-")

# Flink's watermark assigner (WatermarkAssignerOperator) emits when the watermark is more than
# `pipeline.auto-watermark-interval` above the last one emitted, and on a processing-time
# timer of that period: with the default 200 ms, which rows are late depends on how fast the
# job runs. The check runs set it to 0: a watermark on every advance, no timer, so the late rows
# depend on the rows alone, and compare.py computes the reference with that emission.
CHECK_WATERMARK_INTERVAL_MS = 0


def flink_version():
    """The installed apache-flink version, or None."""
    try:
        return importlib.metadata.version("apache-flink")
    except importlib.metadata.PackageNotFoundError:
        return None


def java_version():
    """The first line of `java -version` (the java PyFlink starts: JAVA_HOME's, else PATH's)."""
    java = "java"
    if os.environ.get("JAVA_HOME"):
        java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True)
    except OSError:
        return None
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0] if proc.returncode == 0 and lines else None


def jar_dir(version):
    """Where run.sh puts the Parquet jars: COMPARE_FLINK_JARS, else the cache's per version."""
    if os.environ.get("COMPARE_FLINK_JARS"):
        return Path(os.environ["COMPARE_FLINK_JARS"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "weir-compare" / "flink-jars" / version


def parquet_jars(directory):
    """The jars Flink's Parquet runs add to `pipeline.jars`; (jars, names of the missing)."""
    jars, missing = [], []
    for prefix in PARQUET_JAR_PREFIXES:
        found = sorted(directory.glob(f"{prefix}*.jar")) if directory.is_dir() else []
        if found:
            jars.append(found[-1])
        else:
            missing.append(prefix + "*.jar")
    return jars, missing


def flink_script(query, fmt, data_file, auctions_file, sink_options, out_path):
    """Writes the Flink SQL script of one query, format and sink (templates.py) into out_path;
    the auctions file is the bounded table of `enrichment`, in the same format."""
    return templates.render(
        "flink", query, out_path, bids_path=data_file, bids_format=fmt,
        bids_options=FORMAT_OPTIONS[fmt], sink_options=sink_options,
        auctions_path=auctions_file, auctions_format=fmt, auctions_options=FORMAT_OPTIONS[fmt],
    )


def run_flink(script, parallelism, jars, watermark_interval_ms=None, batch=False):
    """Runs one Flink job in a new process; returns its timings or raises RuntimeError.
    watermark_interval_ms: `pipeline.auto-watermark-interval` (None: Flink's default).
    batch: Flink's batch runtime mode instead of streaming (the checks of the queries with
    updating results: Flink's filesystem sink takes inserts only)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--parallelism", str(parallelism)]
    if batch:
        cmd.append("--batch")
    if watermark_interval_ms is not None:
        cmd += ["--auto-watermark-interval-ms", str(watermark_interval_ms)]
    for jar in jars:
        cmd += ["--jar", str(jar)]
    cmd.append(str(script))
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=script.parent)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        # Java's stack traces are long: keep the exceptions' messages (the last "Caused by:"
        # is the root cause), else the end of stderr.
        lines = proc.stderr.strip().splitlines()
        causes = [x.strip() for x in lines if x.lstrip().startswith("Caused by:")]
        if not causes:
            causes = [x.strip() for x in lines if re.search(r"(Exception|Error): ", x)]
        tail = "\n".join(causes[-4:] if causes else lines[-15:])
        raise RuntimeError(f"Flink on {script.name} exited with {proc.returncode}:\n{tail}")
    summary = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            summary = json.loads(line)
            break
    if summary is None:
        raise RuntimeError(
            f"Flink on {script.name} printed no JSON summary:\n{proc.stdout[-2000:]}"
        )
    summary["process_secs"] = elapsed
    return summary


def duckdb_type(flink_type):
    """The DuckDB type that reads a column of this Flink type from Flink's CSV output."""
    t = flink_type.upper().replace(" NOT NULL", "")
    if t.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    if t.startswith(("STRING", "VARCHAR", "CHAR")):
        return "VARCHAR"
    return t


def check_source(out_dir, columns):
    """DuckDB SQL reading Flink's CSV part files in out_dir, or None when it wrote none.

    columns: the sink table's [name, Flink type] pairs, as the runner reports them. Window
    bounds (TIMESTAMP(3), written as `yyyy-MM-dd HH:mm:ss[.SSS]`) are read as TIMESTAMP.
    """
    files = sorted(f for f in out_dir.glob("**/part-*") if f.is_file() and f.stat().st_size)
    if not files:
        return None
    cols = ", ".join(f"'{name}': '{duckdb_type(t)}'" for name, t in columns)
    paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    return (f"read_csv([{paths}], header = false, auto_detect = false, quote = '\"', "
            f"columns = {{{cols}}})")


# ---------------------------------------------------------------------------------------------
# The script run by run_flink (in the virtual environment that holds apache-flink).


def statements(sql):
    """The statements of a script: full-line `--` comments dropped, split at `;` outside quotes."""
    text = "\n".join(x for x in sql.splitlines() if not x.lstrip().startswith("--"))
    parts = re.findall(r"(?:'(?:[^']|'')*'|[^';])+", text)
    return [p.strip() for p in parts if p.strip()]


def main():
    p = argparse.ArgumentParser(description="Runs one Flink SQL script, timing its last statement.")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--jar", action="append", default=[], help="a jar for pipeline.jars")
    p.add_argument("--auto-watermark-interval-ms", type=int, default=None,
                   help="pipeline.auto-watermark-interval (default: Flink's, 200 ms)")
    p.add_argument("--batch", action="store_true",
                   help="batch runtime mode (default: streaming)")
    p.add_argument("script", type=Path)
    args = p.parse_args()
    stmts = statements(args.script.read_text())

    started = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = (EnvironmentSettings.in_batch_mode() if args.batch
                else EnvironmentSettings.in_streaming_mode())
    env = TableEnvironment.create(settings)
    config = env.get_config()
    config.set("parallelism.default", str(args.parallelism))
    config.set("table.local-time-zone", "UTC")
    if args.auto_watermark_interval_ms is not None:
        config.set("pipeline.auto-watermark-interval", f"{args.auto_watermark_interval_ms} ms")
    if args.jar:
        config.set("pipeline.jars", ";".join(Path(j).resolve().as_uri() for j in args.jar))
    env_secs = time.perf_counter() - started

    for stmt in stmts[:-1]:
        env.execute_sql(stmt)
    columns = [[row[0], row[1]] for row in env.execute_sql("DESCRIBE results").collect()]

    started = time.perf_counter()
    result = env.execute_sql(stmts[-1])
    submit_secs = time.perf_counter() - started
    result.wait()
    execute_secs = time.perf_counter() - started
    net_runtime_ms = None
    client = result.get_job_client()
    if client is not None:
        net_runtime_ms = client.get_job_execution_result().result().get_net_runtime()
    print(json.dumps({
        "env_secs": env_secs,
        "submit_secs": submit_secs,
        "execute_secs": execute_secs,
        "net_runtime_secs": None if net_runtime_ms is None else net_runtime_ms / 1000,
        "columns": columns,
    }), flush=True)


if __name__ == "__main__":
    main()
