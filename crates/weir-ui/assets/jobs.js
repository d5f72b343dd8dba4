// The jobs list: observed phase, desired state, generation, version and lanes, refreshed
// every 2 s.

import { ApiError, get, paths } from "./api.js";
import { h, replace, table } from "./dom.js";
import { time } from "./format.js";
import { showError } from "./notices.js";

/** A phase badge (`running`, `stopped`, `converging`, `failed`, `finished`). */
export function phaseBadge(phase, attrs = {}) {
  return h("span", { class: `badge phase-${phase}`, ...attrs }, phase);
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
      failures = 0;
      if (stopped) return;
      if (jobs.length === 0) {
        replace(
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
      const rows = jobs.map((j) =>
        h(
          "tr",
          { "data-testid": "job-row", dataset: { jobId: j.jobId }, class: "clickable",
            onclick: () => { location.hash = `#/jobs/${encodeURIComponent(j.jobId)}`; } },
          h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(j.jobId)}` }, j.jobId)),
          h("td", {}, phaseBadge(j.observed.phase), j.observed.cause
            ? h("div", { class: "cause" }, j.observed.cause) : null),
          h("td", {}, j.desiredState),
          h("td", { class: "num" }, j.generation),
          h("td", { class: "mono" }, j.currentVersion),
          h("td", { class: "num" }, j.lanes),
          h("td", {}, time(j.createdAt)),
        ),
      );
      replace(
        body,
        table(
          { id: "jobs-table", class: "grid" },
          ["Job", "Observed", "Desired", "Generation", "Version", "Lanes", "Created"],
          rows,
        ),
      );
    } catch (e) {
      // A failed request is shown; a bug in the drawing is left to the console.
      if (!(e instanceof ApiError)) throw e;
      failures += 1;
      if (failures === 1) showError(e, "Listing the jobs");
    }
  }
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
