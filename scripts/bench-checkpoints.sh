#!/usr/bin/env bash
# Checkpoint benchmarks (docs/performance.md, "Checkpoints"). Runs the release `weir` binary on
# the jobs in examples/bench/ and prints the figures of that section:
#
#   throughput  window-tumble.yaml against window-tumble-checkpoint.yaml (checkpoint every 1 s),
#               and the same pair with 10x the input (window-tumble-long*.yaml), parallelism 2,
#               ROUNDS interleaved rounds (the order alternates): median and range of rows/s,
#               ratio, completed checkpoints and their max duration per run.
#   size        window-1m-keys.yaml (1,000,000 keys in one open window) SIZE_RUNS times, with its
#               baseline window-1m-keys-no-checkpoint.yaml interleaved: every checkpoint's
#               duration and state bytes, the keys in state (rows of the `window.groups`
#               segments of each manifest), maxDurationMs and maxStateBytes.
#   restore     window-1m-keys-rolling.yaml (1,000 s windows of 1,000,000 keys), parked by the
#               fail point after-manifest@KILL_EPOCH right after that epoch is durable and
#               SIGKILLed there; then RESTORES runs of `--restore latest`, each from a fresh copy
#               of the killed run's checkpoint directory: the summary's first_output_secs (start
#               of the run, before the restore, to the first row at the sink), the start of the
#               tasks (exit - wall_time_secs: the state is loaded before) and the exit.
#
# Usage: scripts/bench-checkpoints.sh [throughput|size|restore|all]   (default all)
# Environment: ROUNDS (default 7), SIZE_RUNS (3), RESTORES (5), KILL_EPOCH (2),
#   BENCH_DIR (scratch directory, default /var/tmp/weir-bench-checkpoints; removed and
#   recreated), WEIR (a prebuilt binary; default: build with the bench profile and use
#   $CARGO_TARGET_DIR/release/weir).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"
what="${1:-all}"
rounds="${ROUNDS:-7}"
size_runs="${SIZE_RUNS:-3}"
restores="${RESTORES:-5}"
kill_epoch="${KILL_EPOCH:-2}"
bench="${BENCH_DIR:-/var/tmp/weir-bench-checkpoints}"

if [[ -z "${WEIR:-}" ]]; then
    cargo build -p weir-cli --profile bench >&2
    WEIR="$CARGO_TARGET_DIR/release/weir"
    built="built from commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates src Cargo.toml Cargo.lock || echo ' + uncommitted changes')"
else
    built="prebuilt $WEIR, $(date -u -r "$WEIR" '+%Y-%m-%d %H:%M UTC')"
fi
rm -rf "$bench"
mkdir -p "$bench"
# A private copy: another build replacing the binary mid-run must not change what is measured.
cp "$WEIR" "$bench/weir"
W="$bench/weir"

now() { date +%s.%N; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

echo "machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
    "$(awk '/MemTotal/ {printf "%.0f GB RAM", $2 / 1048576}' /proc/meminfo);" \
    "binary $built;" \
    "$(date -u '+%Y-%m-%d %H:%M UTC'); load $(loadavg)"

# Median, min and max of the numbers on stdin, printed with a format for one value.
stats() {
    python3 -c '
import sys, statistics
v = sorted(float(x) for x in sys.stdin.read().split())
f = sys.argv[1]
print((f + " (" + f + " to " + f + ")") % (statistics.median(v), v[0], v[-1]) if v else "-")
' "$1"
}

# Field of every JSON line of a file (dotted path), one per line.
field() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    v = json.loads(line)
    for k in sys.argv[2].split("."):
        v = v[k]
    print(v)
' "$1" "$2"
}

# --- throughput ------------------------------------------------------------------------------
# One run: JSON summary line appended to $bench/<name>.jsonl.
run_json() {
    local name="$1" job="$2"
    local cp="$bench/cp-$name"
    local args=(run "$job" -p 2 --json)
    if grep -q '^checkpoint:' "$job"; then
        rm -rf "$cp"
        args+=(--checkpoint-dir "$cp")
    fi
    loadavg >> "$bench/$name.load"
    "$W" "${args[@]}" >> "$bench/$name.jsonl"
}

report_pair() {
    local base="$1" ck="$2"
    for n in "$base" "$ck"; do
        printf '  %-30s rows/s %s M   wall %s s   peak RSS %s MiB\n' "$n" \
            "$(field "$bench/$n.jsonl" rows_per_sec | awk '{print $1/1e6}' | stats %.2f)" \
            "$(field "$bench/$n.jsonl" wall_time_secs | stats %.3f)" \
            "$(field "$bench/$n.jsonl" peak_rss_bytes | awk '{print $1/1048576}' | stats %.0f)"
    done
    printf '  %-30s completed %s   maxDurationMs %s   maxStateBytes %s\n' "$ck" \
        "$(field "$bench/$ck.jsonl" checkpoints.completed | stats %.0f)" \
        "$(field "$bench/$ck.jsonl" checkpoints.maxDurationMs | stats %.0f)" \
        "$(field "$bench/$ck.jsonl" checkpoints.maxStateBytes | stats %.0f)"
    python3 - "$bench/$base.jsonl" "$bench/$ck.jsonl" <<'EOF'
import json, statistics, sys
a = [json.loads(l)["rows_per_sec"] for l in open(sys.argv[1])]
b = [json.loads(l)["rows_per_sec"] for l in open(sys.argv[2])]
paired = sorted(y / x for x, y in zip(a, b))
print("  with / without checkpoints: ratio of medians %.3f; paired per round: median %.3f (%.3f to %.3f)"
      % (statistics.median(b) / statistics.median(a), statistics.median(paired), paired[0], paired[-1]))
EOF
}

throughput() {
    echo
    echo "== throughput, parallelism 2, $rounds interleaved rounds =="
    for r in $(seq 1 "$rounds"); do
        if (( r % 2 )); then order="nock ck"; else order="ck nock"; fi
        for k in $order; do
            case $k in
                nock) run_json tumble examples/bench/window-tumble.yaml
                      run_json tumble-long examples/bench/window-tumble-long.yaml ;;
                ck)   run_json tumble-ck examples/bench/window-tumble-checkpoint.yaml
                      run_json tumble-long-ck examples/bench/window-tumble-long-checkpoint.yaml ;;
            esac
        done
        echo "  round $r done (load $(loadavg))"
    done
    echo "10,000,000 rows (window-tumble*.yaml):"
    report_pair tumble tumble-ck
    echo "100,000,000 rows (window-tumble-long*.yaml):"
    report_pair tumble-long tumble-long-ck
}

# --- 1M keys: manifests ----------------------------------------------------------------------
# Per manifest of a checkpoint directory: epoch, rows of the window.groups segments (the keys in
# state: one row per (key, window), and the job has one window), segment bytes, input rows read
# at the cut (40,000,000 rows in 40 equal splits).
manifests() {
    python3 - "$1" <<'EOF'
import glob, json, os, sys
rows, splits = 40_000_000, 40
for path in sorted(glob.glob(os.path.join(sys.argv[1], "checkpoint/*/*/manifest.json")),
                   key=lambda p: int(p.split("/")[-2])):
    m = json.load(open(path))
    groups = sum(s["rows"] for t in m["taskSnapshots"] for s in t["segments"] if s["state"] == "window.groups")
    size = sum(s["bytes"] for t in m["taskSnapshots"] for s in t["segments"])
    finished = set(m["sourceEnumeratorSnapshots"][0]["finished"]) if m["sourceEnumeratorSnapshots"] else set()
    read = sum(rows // splits for s in finished) + sum(o["cursor"]["next_record"] for o in m["sourceOffsets"] if o["split"] not in finished)
    print(m["epoch"], groups, size, read, m["durableAtMs"] - m["createdAtMs"])
EOF
}

# Copies every manifest.json of a checkpoint directory that is not copied yet (retention keeps
# only the newest 3).
keep_manifests() {
    local dir="$1" into="$2" f e
    for f in "$dir"/checkpoint/*/*/manifest.json; do
        [[ -e "$f" ]] || continue
        e="$(basename "$(dirname "$f")")"
        [[ -e "$into/checkpoint/ns/$e/manifest.json" ]] && continue
        mkdir -p "$into/checkpoint/ns/$e"
        cp "$f" "$into/checkpoint/ns/$e/" 2>/dev/null || true
    done
}

size() {
    echo
    echo "== 1,000,000 keys: checkpoint duration and size, parallelism 2, $size_runs runs =="
    local i cp seen pid
    for i in $(seq 1 "$size_runs"); do
        "$W" run examples/bench/window-1m-keys-no-checkpoint.yaml -p 2 --json >> "$bench/1m-nock.jsonl"
        cp="$bench/cp-1m-$i"
        seen="$bench/manifests-1m-$i"
        mkdir -p "$seen"
        RUST_LOG=warn,weir_runtime::checkpoint::coordinator=info \
            "$W" run examples/bench/window-1m-keys.yaml -p 2 --json --checkpoint-dir "$cp" \
            >> "$bench/1m.jsonl" 2> "$bench/1m-$i.log" &
        pid=$!
        while kill -0 "$pid" 2> /dev/null; do keep_manifests "$cp" "$seen"; sleep 0.05; done
        wait "$pid"
        keep_manifests "$cp" "$seen"
        echo "  run $i (load $(loadavg)): epoch, keys in state (window.groups rows), segment bytes, rows read at the cut, created->durable ms"
        manifests "$seen" | sed 's/^/    /'
        echo "    coordinator log (epoch, duration_ms, state_bytes):" \
            "$(sed 's/\x1b\[[0-9;]*m//g' "$bench/1m-$i.log" | grep -o 'epoch=[0-9]* duration_ms=[0-9]* state_bytes=[0-9]*' \
               | sed 's/epoch=//; s/ duration_ms=/ /; s/ state_bytes=/ /' | tr '\n' ';')"
    done
    printf '  %-30s rows/s %s M   wall %s s   peak RSS %s MiB\n' window-1m-keys-no-checkpoint \
        "$(field "$bench/1m-nock.jsonl" rows_per_sec | awk '{print $1/1e6}' | stats %.2f)" \
        "$(field "$bench/1m-nock.jsonl" wall_time_secs | stats %.2f)" \
        "$(field "$bench/1m-nock.jsonl" peak_rss_bytes | awk '{print $1/1048576}' | stats %.0f)"
    printf '  %-30s rows/s %s M   wall %s s   peak RSS %s MiB\n' window-1m-keys \
        "$(field "$bench/1m.jsonl" rows_per_sec | awk '{print $1/1e6}' | stats %.2f)" \
        "$(field "$bench/1m.jsonl" wall_time_secs | stats %.2f)" \
        "$(field "$bench/1m.jsonl" peak_rss_bytes | awk '{print $1/1048576}' | stats %.0f)"
    printf '  %-30s completed %s   maxDurationMs %s   maxStateBytes %s   sink rows %s\n' window-1m-keys \
        "$(field "$bench/1m.jsonl" checkpoints.completed | stats %.0f)" \
        "$(field "$bench/1m.jsonl" checkpoints.maxDurationMs | stats %.0f)" \
        "$(field "$bench/1m.jsonl" checkpoints.maxStateBytes | stats %.0f)" \
        "$(field "$bench/1m.jsonl" sink_rows | stats %.0f)"
}

# --- 1M keys: kill and restore ---------------------------------------------------------------
# The rolling job (1,000 s windows of 1,000,000 keys each, one firing every 1,000,000 rows per
# source subtask) is parked by the fail point right after the manifest of epoch KILL_EPOCH is
# durable, and SIGKILLed there; each restore then runs from a fresh copy of its directory.
restore() {
    echo
    echo "== 1,000,000 keys: restart after kill -9, parallelism 2 =="
    local job=examples/bench/window-1m-keys-rolling.yaml cp="$bench/cp-kill" pid line
    rm -rf "$cp"
    WEIR_FAILPOINT="after-manifest@$kill_epoch" "$W" run "$job" -p 2 --json --checkpoint-dir "$cp" \
        > "$bench/kill.json" 2> "$bench/kill.log" &
    pid=$!
    until grep -q "failpoint after-manifest reached" "$bench/kill.log"; do
        if ! kill -0 "$pid" 2> /dev/null; then
            echo "  the job ended before epoch $kill_epoch was durable" >&2
            return 1
        fi
        sleep 0.01
    done
    kill -9 "$pid"
    wait "$pid" 2> /dev/null || true
    line="$(python3 - "$cp" <<'EOF'
import glob, json, sys
rows, splits = 40_000_000, 40
m = max((json.load(open(f)) for f in glob.glob(f"{sys.argv[1]}/checkpoint/*/*/manifest.json")), key=lambda m: m["epoch"])
groups = sum(s["rows"] for t in m["taskSnapshots"] for s in t["segments"] if s["state"] == "window.groups")
size = sum(s["bytes"] for t in m["taskSnapshots"] for s in t["segments"])
finished = set(m["sourceEnumeratorSnapshots"][0]["finished"]) if m["sourceEnumeratorSnapshots"] else set()
read = sum(rows // splits for s in finished) + sum(o["cursor"]["next_record"] for o in m["sourceOffsets"] if o["split"] not in finished)
print(m["epoch"], groups, size, read)
EOF
)"
    local e keys bytes rread
    read -r e keys bytes rread <<< "$line"
    echo "  killed after epoch $e was durable: $keys keys in state (window.groups rows), $bytes segment" \
        "bytes, cut after $rread of 40,000,000 rows"
    local i t0 t1 dir out
    for i in $(seq 1 "$restores"); do
        dir="$bench/cp-restore-$i"
        rm -rf "$dir"
        cp -a "$cp" "$dir"
        sync
        out="$bench/restore-$i"
        t0="$(now)"
        "$W" run "$job" -p 2 --json --checkpoint-dir "$dir" --restore latest > "$out.json" 2> "$out.log"
        t1="$(now)"
        python3 - "$t0" "$t1" "$out" "$i" "$(loadavg)" <<'EOF'
import json, sys
t0, t1, out, i, load = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
s = json.load(open(out + ".json"))
c = s["checkpoints"]
# first_output_secs runs from the start of the run (before the restore) to the first row at a
# sink; wall_time_secs from the start of the tasks (after the state was loaded) to the end.
print(f"  restore {i} (load {load}): first output {s['first_output_secs']:.2f} s, tasks start"
      f" {t1 - t0 - s['wall_time_secs']:.2f} s after exec, exit {t1 - t0:.2f} s; rows replayed"
      f" {s['source_rows']}, restoredFrom {c['restoredFrom']}, checkpoints {c['completed']}"
      f" (max {c['maxDurationMs']} ms)")
EOF
    done
}

case "$what" in
    throughput) throughput ;;
    size) size ;;
    restore) restore ;;
    all) throughput; size; restore ;;
    *) echo "usage: $0 [throughput|size|restore|all]" >&2; exit 2 ;;
esac
