// Live metrics of a job from `GET /api/v1/jobs/{id}/metrics`: per-operator rates,
// backpressure and watermark lag (shared with the graph), and the Metrics tab's uPlot charts.
//
// Counters are cumulative per subtask: a rate is the difference between two consecutive
// samples of a lane over their time difference, summed over subtasks and lanes.

import uPlot from "./vendor/uPlot.esm.js";
import { ApiError, get, paths, pick } from "./api.js";
import { h, replace, table } from "./dom.js";
import { count, duration, percent, rate } from "./format.js";
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

/**
 * The newest figures per operator: `Map(operatorId -> {kind, rowsIn, rowsOut, rows,
 * backpressure, busy, watermarkLag, subtasks})`; rates in rows/s, fractions in 0..1, lag in ms.
 */
export function operatorStats(metrics) {
  const stats = new Map();
  const entry = (s) => {
    const id = pick(s, "operatorId");
    if (!stats.has(id)) {
      stats.set(id, {
        kind: pick(s, "kind"),
        rowsIn: 0,
        rowsOut: 0,
        rows: 0,
        backpressure: null,
        busy: null,
        watermarkLag: null,
        subtasks: 0,
      });
    }
    return stats.get(id);
  };
  for (const lane of metrics.lanes || []) {
    const samples = lane.samples || [];
    const last = samples[samples.length - 1];
    if (!last) continue;
    const prev = samples[samples.length - 2];
    const before = new Map((prev ? prev.subtasks : []).map((s) => [key(s), s]));
    const dt = prev ? last.atMs - prev.atMs : 0;
    for (const s of last.subtasks || []) {
      const e = entry(s);
      e.subtasks += 1;
      const b = before.get(key(s));
      if (b && dt > 0) {
        e.rowsIn += perSecond(s, b, "rowsIn", dt);
        e.rowsOut += perSecond(s, b, "rowsOut", dt);
        if (pick(s, "headsTask")) {
          const ns = dt * 1e6;
          const bp = ((pick(s, "backpressuredNs") ?? 0) - (pick(b, "backpressuredNs") ?? 0)) / ns;
          const busy = ((pick(s, "busyNs") ?? 0) - (pick(b, "busyNs") ?? 0)) / ns;
          e.backpressure = Math.max(e.backpressure ?? 0, Math.min(Math.max(bp, 0), 1));
          e.busy = Math.max(e.busy ?? 0, Math.min(Math.max(busy, 0), 1));
        }
      }
      const wm = pick(s, "watermarkMs");
      if (wm !== null && wm !== undefined) {
        const lag = last.atMs - wm;
        e.watermarkLag = Math.max(e.watermarkLag ?? -Infinity, lag);
      }
    }
  }
  for (const e of stats.values()) e.rows = e.kind === "source" ? e.rowsOut : e.rowsIn;
  return stats;
}

/**
 * Time series for the charts: `{xs (s), operators: [id], rows: Map(id -> [rows/s]),
 * lag: Map(id -> [ms])}`, the lanes' samples put in 1-second buckets.
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
        if (wm !== null && wm !== undefined) {
          minWm.set(id, Math.min(minWm.get(id) ?? Infinity, wm));
        }
      }
      const droppedNow = droppedOf(now);
      const droppedBefore = droppedOf(prev);
      for (const [id, n] of droppedNow) {
        const d = n - (droppedBefore.get(id) ?? n);
        if (d > 0) b.late.set(id, (b.late.get(id) ?? 0) + (d * 1000) / dt);
      }
      for (const [id, wm] of minWm) {
        b.lag.set(id, Math.max(b.lag.get(id) ?? -Infinity, now.atMs - wm));
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

/**
 * Polls the metrics endpoint every `everyMs`. With `history`, it keeps every sample, asking only
 * for those newer than it has, and `onData(metrics)` gets the whole history so far; without, it
 * asks for the two newest samples of each lane (enough for the rates now). `onMissing(error)`
 * gets the first failure.
 */
export function pollMetrics(jobId, everyMs, onData, onMissing, { history = true } = {}) {
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
      if (!stopped && failures === 1) onMissing(e);
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
  showError(e, `Reading the ${what.toLowerCase()}`);
  return null;
}

const PALETTE = ["#2f6fde", "#e0712c", "#2ca25f", "#c0392b", "#8e44ad", "#16a085",
  "#d4ac0d", "#7f8c8d", "#d35400", "#1abc9c"];

/** Unix ms as local "HH:MM:SS". */
function clock(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function chart(title, unit, values, xs, container, format, colors) {
  const ids = [...values.keys()];
  const opts = {
    title,
    width: Math.max(container.clientWidth - 32, 400),
    height: 260,
    scales: { x: { time: true } },
    axes: [
      {
        // Whole seconds, as wall-clock times.
        incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600],
        values: (_u, ticks) => ticks.map((t) => clock(t * 1000)),
        space: 70,
      },
      { values: (_u, ticks) => ticks.map((t) => format(t)), size: 70 },
    ],
    series: [
      {},
      ...ids.map((id, i) => ({
        label: id,
        stroke: colors.get(id) || PALETTE[i % PALETTE.length],
        width: 2,
        spanGaps: true,
        value: (_u, v) => (v === null ? "—" : format(v)),
      })),
    ],
    legend: { live: true },
  };
  const data = [xs, ...ids.map((id) => values.get(id))];
  const el = h("div", { class: "chart", "data-testid": `chart-${unit}`,
    dataset: { points: xs.length } });
  container.append(el);
  return { plot: new uPlot(opts, data, el), ids, unit };
}

export function renderMetrics(root, detail) {
  const jobId = detail.job.jobId;
  const charts = h("div", { class: "charts" });
  const summary = h("div", { class: "card wide" });
  charts.append(h("p", { class: "muted", "data-testid": "charts-waiting" },
    "The charts start after two samples (about two seconds of a running job)."));
  replace(root, charts, summary);
  let plots = null;
  let shape = "";
  return pollMetrics(jobId, 1500, (m) => {
    const stats = operatorStats(m);
    const splits = (m.lanes || []).flatMap((l) => {
      const last = (l.samples || [])[l.samples.length - 1];
      return last ? (last.splits || []).map((sp) => ({ lane: l.lane, ...sp })) : [];
    });
    replace(
      summary,
      h("h2", {}, "Operators now"),
      stats.size === 0
        ? h("p", { class: "muted" }, "No samples yet: the job is not running.")
        : table(
          { class: "grid", id: "operator-metrics" },
          ["Operator", "Kind", "Subtasks", "Rows in/s", "Rows out/s", "Busy",
            "Backpressured", "Watermark lag"],
          [...stats].map(([id, s]) =>
            h("tr", { "data-testid": "operator-metrics-row", dataset: { operatorId: id } },
              h("td", { class: "mono" }, id),
              h("td", {}, s.kind),
              h("td", { class: "num" }, s.subtasks),
              h("td", { class: "num" }, rate(s.rowsIn)),
              h("td", { class: "num" }, rate(s.rowsOut)),
              h("td", { class: "num" }, percent(s.busy)),
              h("td", { class: "num" }, percent(s.backpressure)),
              h("td", { class: "num" }, duration(s.watermarkLag))),
          ),
        ),
      splits.length === 0
        ? null
        : [
          h("h2", { class: "spaced" }, "Source splits"),
          table(
            { class: "grid", id: "split-metrics" },
            ["Lane", "Source", "Split", "Rows read", "Position", "Backlog"],
            splits.map((sp) =>
              h("tr", {},
                h("td", { class: "num" }, sp.lane),
                h("td", { class: "mono" }, sp.operatorId),
                h("td", { class: "mono" }, sp.split),
                h("td", { class: "num" }, count(sp.rowsRead)),
                h("td", { class: "num" }, sp.position ?? "—"),
                h("td", { class: "num" }, sp.backlog === null || sp.backlog === undefined
                  ? "—" : count(sp.backlog)))),
          ),
        ],
    );
    const sr = series(m);
    const newShape = [sr.operators, [...sr.lag.keys()], [...sr.late.keys()]]
      .map((ids) => ids.join(",")).join("|");
    if (sr.xs.length < 2) return;
    if (!plots || newShape !== shape) {
      for (const p of plots || []) p.plot.destroy();
      charts.replaceChildren();
      shape = newShape;
      // One color per operator in both charts.
      const colors = new Map(sr.operators.map((id, i) => [id, PALETTE[i % PALETTE.length]]));
      plots = [chart("Throughput (rows/s per operator)", "rows", sr.rows, sr.xs, charts,
        (v) => rate(v), colors)];
      if (sr.lag.size > 0) {
        plots.push(chart("Watermark lag behind wall-clock time", "lag", sr.lag, sr.xs, charts,
          (v) => duration(v), colors));
      }
      if (sr.late.size > 0) {
        plots.push(chart("Late rows (dropped, routed or updated) per second", "late", sr.late,
          sr.xs, charts, (v) => rate(v), colors));
      }
      return;
    }
    for (const p of plots) {
      const values = { rows: sr.rows, lag: sr.lag, late: sr.late }[p.unit];
      p.plot.setData([sr.xs, ...p.ids.map((id) => values.get(id))]);
    }
    for (const p of plots) p.plot.root.parentElement.dataset.points = String(sr.xs.length);
  }, (e) => {
    const note = unavailable(e, "Metrics");
    if (note) replace(summary, note);
  });
}
