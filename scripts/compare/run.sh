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
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${COMPARE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-compare/venv}"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating the Python virtual environment $venv" >&2
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
    echo "installing duckdb into $venv" >&2
    "$venv/bin/python" -m pip install --quiet duckdb
fi

cd "$root"
export WEIR_BIN="${WEIR_BIN:-target/release/weir}"
exec "$venv/bin/python" "$here/compare.py" "$@"
