// The jobs list (overview): observed phase, desired state, when the current run started, its
// uptime and throughput (rows/s its sources read), generation, version and lanes; refreshed in
// place every 2 s.

import { ApiError, get, paths } from "./api.js";
import { h, patch, replace, table } from "./dom.js";
import { dash, duration, rate, time } from "./format.js";
import { showError } from "./notices.js";
import { sourceRate } from "./metrics-data.js";

/** A phase badge (`running`, `stopped`, `converging`, `failed`, `finished`). */
export function phaseBadge(phase, attrs = {}) {
  return h("span", { class: `badge phase-${phase}`, ...attrs }, phase);
}

/** Rows/s the sources of each running job read now: `Map(jobId -> rate or null)`. */
async function throughputs(jobs) {
  const running = jobs.filter((j) => j.desiredState === "running");
  const rates = await Promise.all(running.map(async (j) => {
    try {
      return [j.jobId, sourceRate(await get(paths.metrics(j.jobId, { last: 2 })))];
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      return [j.jobId, null];
    }
  }));
  return new Map(rates);
}

function row(j, rates) {
  const href = `#/jobs/${encodeURIComponent(j.jobId)}`;
  const since = j.runningSince ? new Date(j.runningSince).getTime() : null;
  // Uptime counts while the run lasts: not for lanes that failed or finished.
  const up = since !== null && ["running", "converging"].includes(j.observed.phase);
  return h(
    "tr",
    { "data-testid": "job-row", key: j.jobId, dataset: { jobId: j.jobId }, class: "clickable",
      onclick: (e) => {
        if (!e.target.closest("a")) location.hash = href;
      } },
    h("td", {}, h("a", { href }, j.jobId)),
    h("td", {}, phaseBadge(j.observed.phase), j.observed.cause
      ? h("div", { class: "cause" }, j.observed.cause) : null),
    h("td", {}, j.desiredState),
    h("td", {}, since === null ? dash : time(since)),
    h("td", { class: "num", "data-testid": "job-uptime" },
      up ? duration(Date.now() - since) : dash),
    h("td", { class: "num", "data-testid": "job-throughput" },
      rates.has(j.jobId) ? rate(rates.get(j.jobId)) : dash),
    h("td", { class: "num" }, j.generation),
    h("td", { class: "mono" }, j.currentVersion),
    h("td", { class: "num" }, j.lanes),
    h("td", {}, time(j.createdAt)),
  );
}

export function renderJobs(root, _params, ctx) {
  const body = h("div", { id: "jobs-body" }, h("p", { class: "muted" }, "Loading…"));
  replace(
    root,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Jobs"),
      ctx.mode === "hub"
        ? h("a", { class: "button primary", href: "#/new", id: "new-job" }, "New job")
        : null,
    ),
    body,
  );
  let stopped = false;
  let failures = 0;
  async function refresh() {
    try {
      const jobs = await get(paths.jobs);
      const rates = await throughputs(jobs);
      failures = 0;
      if (stopped) return;
      if (jobs.length === 0) {
        patch(
          body,
          h(
            "div",
            { class: "empty", "data-testid": "no-jobs" },
            h("p", {}, "No jobs yet."),
            ctx.mode === "hub" ? h("a", { href: "#/new" }, "Write a SQL job") : null,
          ),
        );
        return;
      }
      patch(
        body,
        table(
          { id: "jobs-table", class: "grid" },
          ["Job", "Observed", "Desired", "Running since", "Uptime", "Throughput", "Generation",
            "Version", "Lanes", "Created"],
          jobs.map((j) => row(j, rates)),
        ),
      );
    } catch (e) {
      // A failed request is shown; a bug in the drawing is left to the console.
      if (!(e instanceof ApiError)) throw e;
      failures += 1;
      if (failures === 1 && e.status !== 0) showError(e, "Listing the jobs");
    }
  }
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
