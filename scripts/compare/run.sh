#!/usr/bin/env bash
# Weir against DuckDB on the same bids data: one command that generates the data (with about 1%
# late rows), runs the queries of scripts/compare/queries/ in both, checks Weir's results against
# a sequential reference (reference.py: the rows in file order under Weir's event-time rules)
# and prints a table of times and ratios. See scripts/compare/README.md.
#
# Usage: scripts/compare/run.sh [compare.py options]     (e.g. --rows 200000 --runs 1)
# Environment:
#   WEIR_BIN      the weir binary (default: target/release/weir under the repository root)
#   COMPARE_VENV  the Python virtual environment holding duckdb, outside the clone
#                 (default: ${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/venv; created if missing)
#   PYTHON        the interpreter that creates the venv (default: python3)
#   DUCKDB_VERSION  the duckdb release installed into the venv (default: 2.0.1)
#   NUMPY_VERSION   the numpy release installed into the venv when it has none, for the
#                   sequential reference (default: 2.3.5; a numpy already there is kept:
#                   apache-flink's dependencies may pin another)
# With --flink (README.md, "Flink"):
#   FLINK_VERSION   the apache-flink release installed into the venv (default: 2.3.0; its wheels
#                   are for CPython 3.9 to 3.12)
#   COMPARE_FLINK_JARS  where the jars for Flink's Parquet runs go, fetched once from Maven
#                   Central with mvn (default: ${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/
#                   flink-jars/<FLINK_VERSION>)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
duckdb_version="${DUCKDB_VERSION:-2.0.1}"
numpy_version="${NUMPY_VERSION:-2.3.5}"
venv="${COMPARE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/venv}"
python="${PYTHON:-python3}"
flink_version="${FLINK_VERSION:-2.3.0}"
# The jars Flink needs for Parquet besides PyFlink's own: its Parquet format, Hadoop's client
# (flink-sql-parquet uses Hadoop's Configuration) and snappy-java (Snappy pages).
hadoop_version=3.3.6
snappy_version=1.1.10.7
flink=0
for arg in "$@"; do
    [[ "$arg" == --flink ]] && flink=1
done

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating the Python virtual environment $venv" >&2
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import duckdb, os, sys; sys.exit(duckdb.__version__ != sys.argv[1])' "$duckdb_version" 2>/dev/null; then
    echo "installing duckdb $duckdb_version into $venv" >&2
    "$venv/bin/python" -m pip install --quiet "duckdb==$duckdb_version"
fi
# numpy: the sequential reference (reference.py) and DuckDB's fetchnumpy().
if ! "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    echo "installing numpy $numpy_version into $venv" >&2
    "$venv/bin/python" -m pip install --quiet "numpy==$numpy_version"
fi

if [[ $flink == 1 ]]; then
    java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
    if ! "$java" -version >/dev/null 2>&1; then
        echo "run.sh: --flink needs Java 11 or later (17 recommended):" \
            "PyFlink starts \`java\` (JAVA_HOME or PATH)" >&2
        exit 1
    fi
    installed='import importlib.metadata as m, sys; sys.exit(m.version("apache-flink") != sys.argv[1])'
    if ! "$venv/bin/python" -c "$installed" "$flink_version" 2>/dev/null; then
        pyver="$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
        wheels='import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 12))'
        if [[ "$flink_version" == 2.3.0 ]] && ! "$venv/bin/python" -c "$wheels"; then
            echo "run.sh: apache-flink 2.3.0 has wheels for CPython 3.9 to 3.12 only," \
                "and $venv has Python $pyver." >&2
            echo "Give run.sh a virtual environment of its own made by one of those, e.g." >&2
            echo "  PYTHON=python3.12 COMPARE_VENV=\$HOME/.cache/weir-compare/venv-py312" \
                "scripts/compare/run.sh --flink ..." >&2
            exit 1
        fi
        echo "installing apache-flink $flink_version into $venv (about 350 MB)" >&2
        if ! "$venv/bin/python" -m pip install --quiet "apache-flink==$flink_version"; then
            echo "run.sh: pip could not install apache-flink==$flink_version" \
                "for Python $pyver in $venv" >&2
            echo "(apache-flink 2.3.0 has wheels for CPython 3.9 to 3.12;" \
                "PYTHON and COMPARE_VENV choose another)" >&2
            exit 1
        fi
    fi
    jars="${COMPARE_FLINK_JARS:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/flink-jars/$flink_version}"
    artifacts=(
        "org.apache.flink:flink-sql-parquet:$flink_version"
        "org.apache.hadoop:hadoop-client-api:$hadoop_version"
        "org.apache.hadoop:hadoop-client-runtime:$hadoop_version"
        "org.xerial.snappy:snappy-java:$snappy_version"
    )
    for artifact in "${artifacts[@]}"; do
        IFS=: read -r _ name version <<<"$artifact"
        [[ -f "$jars/$name-$version.jar" ]] && continue
        if ! command -v mvn >/dev/null; then
            echo "run.sh: no mvn to fetch $artifact: Flink cannot read Parquet" \
                "(install Maven, or leave Parquet out with --formats csv,json)" >&2
            break
        fi
        echo "fetching $artifact into $jars" >&2
        mkdir -p "$jars"
        (cd "$jars" && mvn --batch-mode --quiet dependency:copy \
            -Dartifact="$artifact" -DoutputDirectory="$jars") >&2
    done
    export COMPARE_FLINK_JARS="$jars"
fi

cd "$root"
export WEIR_BIN="${WEIR_BIN:-target/release/weir}"
exec "$venv/bin/python" "$here/compare.py" "$@"
