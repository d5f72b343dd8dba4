// A job's Overview tab: the summary (with when the current run started and its uptime), the
// version, the lanes of the current generation, the restart history (each generation's lanes
// as the Hub recorded them, with why they failed, and the runtime's automatic restarts within
// the current run) and the upgrades. Redrawn in place every 2 s.

import { ApiError, get, paths, pick } from "./api.js";
import { field, h, patch, table } from "./dom.js";
import { count, dash, duration, short, time } from "./format.js";

/** Time since the current run started, while it lasts (not for failed or finished lanes). */
const uptime = (j) => (j.runningSince && ["running", "converging"].includes(j.observed.phase)
  ? duration(Date.now() - new Date(j.runningSince).getTime()) : dash);

function summaryCard(j) {
  return h("div", { class: "card" }, h("h2", {}, "Summary"),
    h("dl", { class: "facts grid2" },
      field("Job", j.jobId),
      field("Observed", j.observed.phase),
      field("Desired", j.desiredState),
      field("Generation", String(j.generation)),
      field("Lanes", String(j.lanes)),
      field("Created", time(j.createdAt)),
      field("Running since", time(j.runningSince ?? null), { "data-testid": "running-since" }),
      field("Uptime", uptime(j), { "data-testid": "uptime" })));
}

function versionCard(v) {
  return h("div", { class: "card" }, h("h2", {}, "Version"),
    h("dl", { class: "facts grid2" },
      field("Version", `${v.number} · ${v.versionId}`),
      field("Created", time(v.createdAt)),
      field("Plan fingerprint", h("span", { class: "mono", title: v.planFingerprint },
        short(v.planFingerprint, 16))),
      field("State format", String(v.stateFormatVersion)),
      field("Source", v.sql ? "SQL script" : "job spec")));
}

function assignmentsCard(d) {
  return h("div", { class: "card wide" }, h("h2", {}, "Assignments"),
    d.assignments.length === 0
      ? h("p", { class: "muted" }, "No lane is placed: the job is stopped.")
      : table({ class: "grid", id: "assignments-table" }, ["Lane", "Agent", "State", "Cause"],
        d.assignments.map((a) =>
          h("tr", { "data-testid": "assignment-row", key: a.lane },
            h("td", { class: "num" }, a.lane),
            h("td", {}, a.agentId || h("span", { class: "muted" }, "waiting for a slot")),
            h("td", {}, h("span", { class: `badge lane-${a.state}` }, a.state)),
            h("td", { class: "cause" }, a.cause || "")))));
}

/** `restarts`: lane -> automatic restarts in the current run (from the checkpoint counters). */
function historyCard(d, restarts) {
  const history = d.laneHistory || [];
  const automatic = [...restarts].filter(([, n]) => n > 0);
  return h("div", { class: "card wide", "data-testid": "restart-history" },
    h("h2", {}, "Restarts and failures"),
    h("p", { class: "muted" },
      "Every start, stop and re-placement of the job is a new generation; below, the lanes of " +
      "each as the Hub last recorded them. A failed lane restarts automatically inside its run " +
      "(the runtime's restart policy) before the Hub sees it fail."),
    h("p", { "data-testid": "automatic-restarts" }, restarts.size === 0
      ? h("span", { class: "muted" }, "Automatic restarts in the current run: no figures (the " +
        "job is not running, or takes no checkpoints).")
      : `Automatic restarts in the current run: ${automatic.length === 0 ? "none"
        : automatic.map(([lane, n]) => `lane ${lane}: ${count(n)}`).join(", ")}.`),
    history.length === 0
      ? h("p", { class: "muted" }, "No lane has been placed yet.")
      : table({ class: "grid", id: "lane-history" },
        ["Generation", "Lane", "Agent", "State", "Cause", "Recorded"],
        history.map((r) =>
          h("tr", { key: `${r.generation}#${r.lane}`, "data-testid": "history-row",
            class: r.generation === d.job.generation ? "current" : null },
          h("td", { class: "num" }, r.generation),
          h("td", { class: "num" }, r.lane),
          h("td", { class: "mono" }, r.agentId || dash),
          h("td", {}, h("span", { class: `badge lane-${r.state}` }, r.state)),
          h("td", { class: "cause" }, r.cause || ""),
          h("td", {}, time(r.updatedAt))))));
}

function upgradesCard(d) {
  return h("div", { class: "card wide" }, h("h2", {}, "Upgrades"),
    d.upgrades.length === 0
      ? h("p", { class: "muted" }, "None.")
      : table({ class: "grid" }, ["Upgrade", "From", "To", "Savepoint", "State", "When"],
        d.upgrades.map((u) =>
          h("tr", { key: u.upgradeId },
            h("td", { class: "mono" }, u.upgradeId),
            h("td", { class: "mono" }, u.fromVersion),
            h("td", { class: "mono" }, u.toVersion),
            h("td", { class: "mono" }, u.savepointId),
            h("td", {}, u.state),
            h("td", {}, time(u.createdAt))))));
}

export function renderOverview(root, _detail, _ctx, current) {
  let stopped = false;
  let restarts = new Map();
  const draw = () => {
    const d = current();
    patch(root, h("div", { class: "overview", "data-testid": "overview" }, summaryCard(d.job),
      versionCard(d.version), assignmentsCard(d), historyCard(d, restarts), upgradesCard(d)));
  };
  async function refresh() {
    try {
      const c = await get(paths.checkpoints(current().job.jobId));
      restarts = new Map((c.lanes || []).filter((l) => l.summary)
        .map((l) => [l.lane, pick(l.summary, "restarts") ?? 0]));
    } catch (e) {
      // The restarts are a detail: the job's page says when the Hub cannot be read.
      if (!(e instanceof ApiError)) throw e;
    }
    if (!stopped) draw();
  }
  draw();
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
