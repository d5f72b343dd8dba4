#!/usr/bin/env bash
# Weir against DuckDB on the same bids data: one command that generates the data, runs the
# queries of scripts/compare/queries/ in both, checks that Weir's results equal DuckDB's and
# prints a table of times and ratios. See scripts/compare/README.md.
#
# Usage: scripts/compare/run.sh [compare.py options]     (e.g. --rows 200000 --runs 1)
# Environment:
#   WEIR_BIN      the weir binary (default: target/release/weir under the repository root)
#   COMPARE_VENV  the Python virtual environment holding duckdb, outside the clone
#                 (default: ${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/venv; created if missing)
#   PYTHON        the interpreter that creates the venv (default: python3)
#   DUCKDB_VERSION  the duckdb release installed into the venv (default: 2.0.1)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
duckdb_version="${DUCKDB_VERSION:-2.0.1}"
venv="${COMPARE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/venv}"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating the Python virtual environment $venv" >&2
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import duckdb, os, sys; sys.exit(duckdb.__version__ != sys.argv[1])' "$duckdb_version" 2>/dev/null; then
    echo "installing duckdb $duckdb_version into $venv" >&2
    "$venv/bin/python" -m pip install --quiet "duckdb==$duckdb_version"
fi

cd "$root"
export WEIR_BIN="${WEIR_BIN:-target/release/weir}"
exec "$venv/bin/python" "$here/compare.py" "$@"
