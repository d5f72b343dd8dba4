// Figures from `GET /api/v1/jobs/{id}/metrics`, shared by the graph, the Metrics tab and the jobs
// list: per-operator and per-subtask rates, backpressure and watermarks, the charts' series, and
// the poller.
//
// Counters are cumulative per subtask: a rate is the difference between two consecutive
// samples of a lane over their time difference, summed over subtasks and lanes. A watermark's
// lag is measured against the newest event time the lane's sources read (`maxEventTimeMs`), not
// the wall clock: historical data replayed is not "late" because it is old.

import { ApiError, get, paths, pick } from "./api.js";
import { h } from "./dom.js";
import { showError } from "./notices.js";

/** The late-row counters of a subtask (window operators count them). */
const LATE = ["lateRouted", "lateUpdated"];

/** Rows an operator dropped so far (late rows, rows without an event time), by operator id. */
const droppedOf = (sample) =>
  new Map((sample.operators || []).map((o) => [o.operatorId, o.dropped ?? 0]));

const key = (s) => `${pick(s, "operatorId")}#${pick(s, "subtask")}`;

function perSecond(now, before, name, dtMs) {
  const d = (pick(now, name) ?? 0) - (pick(before, name) ?? 0);
  return d >= 0 && dtMs > 0 ? (d * 1000) / dtMs : 0;
}

const share = (now, before, name, dtMs) =>
  Math.min(Math.max(((pick(now, name) ?? 0) - (pick(before, name) ?? 0)) / (dtMs * 1e6), 0), 1);

/** The newest event time the sources of one lane's sample read (Unix ms), or null. */
export function newestEventTime(sample) {
  let newest = null;
  for (const s of (sample && sample.subtasks) || []) {
    const t = pick(s, "maxEventTimeMs");
    if (t !== null && t !== undefined) newest = newest === null ? t : Math.max(newest, t);
  }
  return newest;
}

/**
 * Every subtask's figures now, one entry per lane and subtask of each operator: `{operatorId,
 * kind, lane, subtask, headsTask, rowsIn, rowsOut, busy, backpressure, watermark, newestEvent,
 * eventLag}`; rates in rows/s, shares in 0..1 (null without two samples), times in Unix ms.
 */
export function subtaskFigures(metrics) {
  const out = [];
  for (const lane of metrics.lanes || []) {
    const samples = lane.samples || [];
    const last = samples[samples.length - 1];
    if (!last) continue;
    const prev = samples[samples.length - 2];
    const before = new Map((prev ? prev.subtasks : []).map((s) => [key(s), s]));
    const dt = prev ? last.atMs - prev.atMs : 0;
    const newest = newestEventTime(last);
    for (const s of last.subtasks || []) {
      const b = before.get(key(s));
      const timed = b && dt > 0;
      const wm = pick(s, "watermarkMs") ?? null;
      out.push({
        operatorId: s.operatorId,
        kind: s.kind,
        lane: lane.lane,
        subtask: s.subtask,
        headsTask: !!s.headsTask,
        rowsIn: timed ? perSecond(s, b, "rowsIn", dt) : null,
        rowsOut: timed ? perSecond(s, b, "rowsOut", dt) : null,
        busy: timed && s.headsTask ? share(s, b, "busyNs", dt) : null,
        backpressure: timed && s.headsTask ? share(s, b, "backpressuredNs", dt) : null,
        watermark: wm,
        newestEvent: pick(s, "maxEventTimeMs") ?? null,
        eventLag: wm !== null && newest !== null ? Math.max(newest - wm, 0) : null,
      });
    }
  }
  return out;
}

const maxOf = (a, b) => (b === null ? a : a === null ? b : Math.max(a, b));
const minOf = (a, b) => (b === null ? a : a === null ? b : Math.min(a, b));

/**
 * The newest figures per operator: `Map(operatorId -> {kind, rowsIn, rowsOut, rows,
 * backpressure, busy, watermark, newestEvent, eventLag, subtasks})`: rates summed over
 * subtasks and lanes, shares and lag the largest of a subtask, the watermark the lowest.
 */
export function operatorStats(metrics) {
  const stats = new Map();
  for (const f of subtaskFigures(metrics)) {
    if (!stats.has(f.operatorId)) {
      stats.set(f.operatorId, { kind: f.kind, rowsIn: 0, rowsOut: 0, rows: 0, backpressure: null,
        busy: null, watermark: null, newestEvent: null, eventLag: null, subtasks: 0 });
    }
    const e = stats.get(f.operatorId);
    e.subtasks += 1;
    e.rowsIn += f.rowsIn ?? 0;
    e.rowsOut += f.rowsOut ?? 0;
    e.busy = maxOf(e.busy, f.busy);
    e.backpressure = maxOf(e.backpressure, f.backpressure);
    e.watermark = minOf(e.watermark, f.watermark);
    e.newestEvent = maxOf(e.newestEvent, f.newestEvent);
    e.eventLag = maxOf(e.eventLag, f.eventLag);
  }
  for (const e of stats.values()) e.rows = e.kind === "source" ? e.rowsOut : e.rowsIn;
  return stats;
}

/** Rows per second the job's sources read now (summed), or null without figures. */
export function sourceRate(metrics) {
  let total = null;
  for (const s of operatorStats(metrics).values()) {
    if (s.kind === "source") total = (total ?? 0) + s.rows;
  }
  return total;
}

/**
 * Time series for the charts: `{xs (s), operators: [id], rows: Map(id -> [rows/s]),
 * lag: Map(id -> [ms behind the newest event time]), late: Map(id -> [rows/s])}`, the lanes'
 * samples put in 1-second buckets.
 */
export function series(metrics) {
  const buckets = new Map();
  const operators = new Set();
  const bucket = (t) => {
    if (!buckets.has(t)) buckets.set(t, { rows: new Map(), lag: new Map(), late: new Map() });
    return buckets.get(t);
  };
  for (const lane of metrics.lanes || []) {
    const samples = lane.samples || [];
    for (let i = 1; i < samples.length; i += 1) {
      const now = samples[i];
      const prev = samples[i - 1];
      const dt = now.atMs - prev.atMs;
      if (dt <= 0) continue;
      const before = new Map(prev.subtasks.map((s) => [key(s), s]));
      const b = bucket(Math.round(now.atMs / 1000));
      const newest = newestEventTime(now);
      const minWm = new Map();
      for (const s of now.subtasks) {
        const id = pick(s, "operatorId");
        operators.add(id);
        const p = before.get(key(s));
        if (p) {
          const name = pick(s, "kind") === "source" ? "rowsOut" : "rowsIn";
          b.rows.set(id, (b.rows.get(id) ?? 0) + perSecond(s, p, name, dt));
          const late = LATE.reduce((sum, f) => sum + perSecond(s, p, f, dt), 0);
          b.late.set(id, (b.late.get(id) ?? 0) + late);
        }
        const wm = pick(s, "watermarkMs");
        if (wm !== null && wm !== undefined) minWm.set(id, Math.min(minWm.get(id) ?? Infinity, wm));
      }
      const droppedNow = droppedOf(now);
      const droppedBefore = droppedOf(prev);
      for (const [id, n] of droppedNow) {
        const d = n - (droppedBefore.get(id) ?? n);
        if (d > 0) b.late.set(id, (b.late.get(id) ?? 0) + (d * 1000) / dt);
      }
      if (newest === null) continue;
      for (const [id, wm] of minWm) {
        b.lag.set(id, Math.max(b.lag.get(id) ?? -Infinity, Math.max(newest - wm, 0)));
      }
    }
  }
  const xs = [...buckets.keys()].sort((a, b) => a - b);
  const ids = [...operators];
  const rows = new Map(ids.map((id) => [id, xs.map((t) => buckets.get(t).rows.get(id) ?? null)]));
  const lag = new Map();
  const late = new Map();
  for (const id of ids) {
    const values = xs.map((t) => buckets.get(t).lag.get(id) ?? null);
    if (values.some((v) => v !== null)) lag.set(id, values);
    // Only operators that had late or dropped rows get a line.
    const lateValues = xs.map((t) => buckets.get(t).late.get(id) ?? null);
    if (lateValues.some((v) => v)) late.set(id, lateValues);
  }
  return { xs, operators: ids, rows, lag, late };
}

/** Samples the Hub keeps per lane (ten minutes, one a second); the page keeps as many. */
const KEPT_SAMPLES = 600;

/**
 * `view` with the newer samples of `update` appended per lane (a new generation replaces it):
 * the endpoint is asked only for what the page has not seen.
 */
function merged(view, update) {
  if (!view || view.generation !== update.generation) return update;
  const lanes = new Map(view.lanes.map((l) => [l.lane, l]));
  for (const u of update.lanes) {
    const lane = lanes.get(u.lane);
    if (!lane) {
      lanes.set(u.lane, u);
      continue;
    }
    const last = lane.samples.length ? lane.samples[lane.samples.length - 1].atMs : -Infinity;
    const samples = lane.samples.concat(u.samples.filter((s) => s.atMs > last));
    lanes.set(u.lane, { ...u, samples: samples.slice(-KEPT_SAMPLES) });
  }
  return { ...update, lanes: [...lanes.values()].sort((a, b) => a.lane - b.lane) };
}

/** The time of the oldest of the lanes' newest samples: what to ask for after. */
function seenUntil(view) {
  if (!view || view.lanes.length === 0) return null;
  const newest = view.lanes.map((l) => (l.samples.length ? l.samples[l.samples.length - 1].atMs : null));
  return newest.some((t) => t === null) ? null : Math.min(...newest);
}

/** The time of the newest sample of any lane (Unix ms), or null. */
export function newestSample(view) {
  let newest = null;
  for (const l of (view && view.lanes) || []) {
    const s = l.samples[l.samples.length - 1];
    if (s) newest = maxOf(newest, s.atMs);
  }
  return newest;
}

/**
 * Polls the metrics endpoint every `everyMs`. With `history`, it keeps every sample, asking only
 * for those newer than it has, and `onData(metrics)` gets the whole history so far; without, it
 * asks for the two newest samples of each lane (enough for the rates now). `onFail(error,
 * failures)` gets every failure (`failures` in a row).
 */
export function pollMetrics(jobId, everyMs, onData, onFail, { history = true } = {}) {
  let stopped = false;
  let failures = 0;
  let view = null;
  async function tick() {
    try {
      const query = history ? { since: seenUntil(view) } : { last: 2 };
      const update = await get(paths.metrics(jobId, query));
      failures = 0;
      view = history ? merged(view, update) : update;
      if (!stopped) onData(view);
    } catch (e) {
      // A failed request is shown; a bug in the drawing is left to the console.
      if (!(e instanceof ApiError)) throw e;
      failures += 1;
      if (!stopped) onFail(e, failures);
    }
  }
  tick();
  const timer = setInterval(tick, everyMs);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

/** A "not available" note for an endpoint this server does not have (404). */
export function unavailable(e, what) {
  // The Hub answers an unknown path with "no endpoint `...`" (an unknown job: "no job").
  if (e instanceof ApiError && e.status === 404 && e.message.includes("no endpoint")) {
    return h("p", { class: "empty", "data-testid": "unavailable" },
      `${what} are not available from this server (${e.message}).`);
  }
  // The Hub being down is said once, in the top bar and the views' status lines.
  if (!(e instanceof ApiError && e.status === 0)) showError(e, `Reading the ${what.toLowerCase()}`);
  return null;
}
