#!/usr/bin/env bash
# The S3 tests against SeaweedFS, a second S3-compatible server beside moto (which the tests
# start themselves): builds SeaweedFS once (Go) into a cache directory, starts it on 127.0.0.1
# with its data in a temporary directory, runs the S3 tests with WEIR_TEST_S3_ENDPOINT pointing
# at it (crates/weir-testkit/src/s3.rs), stops it by its PID and prints a summary.
#
# Usage: scripts/s3-seaweedfs.sh
#   CARGO_TARGET_DIR       the target directory (default /var/tmp/weir-target)
#   WEIR_SEAWEEDFS_CACHE   where the built `weed` binary is kept
#                          (default $CARGO_TARGET_DIR/weir-testkit/seaweedfs)
# Needs: go (the Go toolchain, first run only), curl.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/weir-target}"

# The SeaweedFS source, a Go module: the version the Go module proxy serves.
module="github.com/seaweedfs/seaweedfs"
version="v0.0.0-20261109003541-7506e5f91cd6"
cache="${WEIR_SEAWEEDFS_CACHE:-$CARGO_TARGET_DIR/weir-testkit/seaweedfs}"
weed="$cache/$version/weed"

# The S3 tests, as `cargo test` arguments; each must run at least one test.
tests=(
    "-p weir-testkit --lib s3::tests::the_server_creates_buckets"
    "-p weir-checkpoint --lib s3_tests::"
    "-p weir-file --lib sink::tests::epoch_transactions_on_s3"
    "-p weir --test engine s3::"
)

say() { echo "s3-seaweedfs: $*" >&2; }

need() {
    command -v "$1" >/dev/null 2>&1 && return
    say "needs $1, which is missing: $2"
    exit 2
}

# Builds `weed` into $weed: `go install` refuses the module (its go.mod has replace
# directives), so the module is downloaded, copied somewhere writable and built there. The Go
# caches of the build (about 4 GB) are private to it and removed afterwards.
build() {
    need go "install the Go toolchain (https://go.dev/doc/install, or Debian/Ubuntu: apt-get install golang)"
    local work="$cache/build" started json dir
    started=$SECONDS
    say "building SeaweedFS $version once into $cache (a few minutes, about 4 GB of temporary Go caches)"
    rm -rf "$work"
    mkdir -p "$work" "$(dirname "$weed")"
    export GOMODCACHE="$work/mod" GOCACHE="$work/gocache" GOFLAGS=-modcacherw GOTOOLCHAIN=local
    json="$(cd "$work" && go mod download -json "$module@$version")"
    dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
    if [ -z "$dir" ] || [ ! -d "$dir" ]; then
        say "go mod download $module@$version gave no module directory:"
        echo "$json" >&2
        exit 1
    fi
    cp -r "$dir" "$work/src"
    chmod -R u+w "$work/src"
    (cd "$work/src" && go build -o "$weed.tmp" ./weed)
    mv "$weed.tmp" "$weed"
    rm -rf "$work"
    say "built $weed in $((SECONDS - started)) s"
}

need curl "Debian/Ubuntu: apt-get install curl"
mkdir -p "$cache"
exec 9>"$cache/build.lock"
flock 9
[ -x "$weed" ] || build
flock -u 9

# Whether something listens on 127.0.0.1:$1.
listening() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Four consecutive ports (master, volume, filer, S3) whose gRPC ports (+10000) are free too.
pick_ports() {
    local base p
    for _ in $(seq 50); do
        base=$((20000 + RANDOM % 20000))
        for p in $base $((base + 1)) $((base + 2)) $((base + 3)); do
            if listening "$p" || listening $((p + 10000)); then
                continue 2
            fi
        done
        echo "$base"
        return
    done
    say "found no free ports"
    exit 1
}

data="$(mktemp -d "${TMPDIR:-/tmp}/weir-seaweedfs.XXXXXX")"
log="$data/weed.log"
pid=""
stop() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        # `weed server` stops its parts in turn; a stuck one is killed after 20 s.
        for _ in $(seq 200); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$data"
}
trap stop EXIT
trap 'exit 130' INT TERM

base="$(pick_ports)"
s3_port=$((base + 3))
endpoint="http://127.0.0.1:$s3_port"
# One process: master, volume server, filer and the S3 gateway, bound to 127.0.0.1, without the
# Iceberg and Lance endpoints, telemetry off; no S3 identities, so it accepts any credentials
# (as moto does) and bucket creation without them.
"$weed" -logtostderr=true server \
    -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$data" \
    -master.port="$base" -volume.port=$((base + 1)) -filer -filer.port=$((base + 2)) \
    -s3 -s3.port="$s3_port" -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.telemetry=false -master.volumeSizeLimitMB=64 -volume.max=0 \
    >"$log" 2>&1 </dev/null &
pid=$!
say "SeaweedFS $version started, PID $pid, S3 at $endpoint, data in $data"

# Ready when an (unsigned) PUT of a bucket succeeds.
started=$SECONDS
while :; do
    code="$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$endpoint/weir-ready-probe" || true)"
    [ "$code" = 200 ] && break
    if ! kill -0 "$pid" 2>/dev/null || [ $((SECONDS - started)) -ge 120 ]; then
        say "SeaweedFS did not accept a PUT within $((SECONDS - started)) s (last HTTP status $code); its log ends with:"
        tail -n 30 "$log" >&2
        exit 1
    fi
    sleep 0.5
done
say "SeaweedFS accepted a PUT after $((SECONDS - started)) s"

export WEIR_TEST_S3_ENDPOINT="$endpoint"
results=()
passed=0
failed=0
for t in "${tests[@]}"; do
    out="$data/cargo-test.out"
    say "cargo test $t"
    begun=$SECONDS
    status=0
    # shellcheck disable=SC2086 # the arguments are split on purpose
    cargo test $t 2>&1 | tee "$out" || status=$?
    n="$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' "$out" | awk '{s += $1} END {print s + 0}')"
    if [ "$status" -eq 0 ] && [ "$n" -gt 0 ]; then
        results+=("ok    $(printf '%4d s' $((SECONDS - begun)))  $n passed  cargo test $t")
        passed=$((passed + 1))
    else
        why="exit $status"
        [ "$status" -eq 0 ] && why="no test matched"
        results+=("FAIL  $(printf '%4d s' $((SECONDS - begun)))  $why, $n passed  cargo test $t")
        failed=$((failed + 1))
    fi
    kill -0 "$pid" 2>/dev/null || {
        say "SeaweedFS (PID $pid) exited during the tests; its log ends with:"
        tail -n 30 "$log" >&2
    }
done

echo
echo "S3 tests against SeaweedFS $version at $endpoint:"
printf '  %s\n' "${results[@]}"
echo "seaweedfs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
