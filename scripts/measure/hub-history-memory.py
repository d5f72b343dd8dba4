#!/usr/bin/env python3
"""The Hub's memory for the workbench's sample history (docs/performance.md, "The Hub's sample
history"): starts `weir hub` on a free port, submits a job of LANES lanes, plays an Agent that
pushes 600 samples (ten minutes' worth) of SUBTASKS operator subtasks per lane, and prints the
Hub's resident memory before and after, the size of the whole metrics view and of one poll that
asks only for the newest sample. The Hub is stopped by its PID.

    python3 scripts/measure/hub-history-memory.py target/debug/weir 20 10
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

RUNTIME_VERSION = subprocess.run([sys.argv[1], "--version"], capture_output=True, text=True).stdout.split()[-1]
BIN = sys.argv[1]; LANES = int(sys.argv[2]); SUBTASKS = int(sys.argv[3]); SAMPLES = 600
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
base = f"http://127.0.0.1:{port}"
d = tempfile.mkdtemp(prefix="weir-hub-memory-")
hub = subprocess.Popen([BIN, "hub", "--listen", f"127.0.0.1:{port}", "--db", f"{d}/hub.sqlite", "--lease-ttl", "10m"], stderr=subprocess.DEVNULL)
def call(method, path, body=None, token=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("content-type", "application/json")
    if token: req.add_header("authorization", "Bearer " + token)
    return json.loads(urllib.request.urlopen(req).read())
for _ in range(100):
    try: call("GET", "/api/v1/jobs"); break
    except Exception: time.sleep(0.1)
def rss():
    for l in open(f"/proc/{hub.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
reg = call("POST", "/api/v1/agents/register", {"agentId": "a", "bootId": "b", "capabilities": {"runtimeVersion": RUNTIME_VERSION, "stateBackends": ["redb"], "checkpointProtocol": 1, "slots": 1000}})
spec = {"parallelism": LANES, "checkpoint": {"interval": "1h", "dir": d + "/cp"},
        "sources": [{"name": "bids", "connector": "datagen", "schema": [{"name": "auction", "type": "int64"}], "options": {"rows": 10}}],
        "sinks": [{"name": "out", "connector": "blackhole", "input": "bids"}]}
call("POST", "/api/v1/jobs", {"name": "mem", "spec": spec, "desiredState": "running"})
gen = call("GET", "/api/v1/jobs/mem")["generation"]
before = rss()
t0 = int(time.time() * 1000)
for i in range(SAMPLES):
    lanes = []
    for lane in range(LANES):
        subs = [{"operatorId": f"operator_{k}", "kind": "operator", "subtask": 0, "rowsIn": i * 1000 + k, "rowsOut": i * 1000,
                 "batchesIn": i, "batchesOut": i, "bytesIn": i * 8000, "bytesOut": i * 8000, "headsTask": True,
                 "idleNs": i * 10**6, "busyNs": i * 10**6, "backpressuredNs": 0, "watermarkMs": t0 + i * 1000,
                 "lateRouted": 0, "lateUpdated": 0, "stateEntries": 100, "stateBytes": 4096} for k in range(SUBTASKS)]
        lanes.append({"jobId": "mem", "lane": lane, "generation": gen, "sample": {"atMs": t0 + i * 1000, "subtasks": subs, "splits": [], "operators": []}, "epochs": []})
    call("POST", "/api/v1/agents/a/heartbeat", None, reg["sessionToken"])
    ack = call("POST", "/api/v1/agents/a/metrics", {"lanes": lanes}, reg["sessionToken"])
    assert ack["accepted"] == LANES, ack
after = rss()
assert call("GET", "/api/v1/jobs/mem")["generation"] == gen, "the lanes moved: the lease lapsed"
call("POST", "/api/v1/agents/a/heartbeat", None, reg["sessionToken"])
view = urllib.request.urlopen(base + "/api/v1/jobs/mem/metrics").read()
poll = urllib.request.urlopen(base + f"/api/v1/jobs/mem/metrics?since={t0 + (SAMPLES - 2) * 1000}").read()
print(json.dumps({"lanes": LANES, "subtasks_per_lane": SUBTASKS, "samples": SAMPLES, "rss_before_kib": before, "rss_after_kib": after,
                  "kib_per_lane": (after - before) / LANES, "bytes_per_subtask_sample": (after - before) * 1024 / (LANES * SAMPLES * SUBTASKS),
                  "metrics_view_bytes": len(view), "poll_bytes": len(poll)}))
hub.kill(); hub.wait()
