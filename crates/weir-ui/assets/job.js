// A job's page: its header (phase, desired state, generation, version), the actions (start,
// stop, savepoint, upgrade, rollback) and the tabs Overview, Graph, Metrics, Checkpoints, SQL.

import { ApiError, get, paths, post, put } from "./api.js";
import { field, h, patch, replace } from "./dom.js";
import { time } from "./format.js";
import { clearError, showError, toast } from "./notices.js";
import { phaseBadge } from "./jobs.js";
import { createEditor } from "./editor.js";
import { renderGraph } from "./graph.js";
import { renderMetrics } from "./metrics.js";
import { renderCheckpoints } from "./checkpoints.js";
import { renderOverview } from "./overview.js";

const TABS = [
  ["overview", "Overview"],
  ["graph", "Graph"],
  ["metrics", "Metrics"],
  ["checkpoints", "Checkpoints"],
  ["sql", "SQL"],
];

export function renderJob(root, params, ctx) {
  const jobId = params.jobId;
  const tab = TABS.some(([t]) => t === params.tab) ? params.tab : "overview";
  const head = h("div", { class: "job-head" }, h("h1", { id: "job-title" }, jobId));
  const actions = h("div", { class: "job-actions", id: "job-actions" });
  const panel = h("div", { class: "action-panel", id: "action-panel", hidden: true });
  const tabs = h(
    "nav",
    { class: "tabs", role: "tablist" },
    TABS.map(([t, label]) =>
      h(
        "a",
        {
          href: `#/jobs/${encodeURIComponent(jobId)}/${t}`,
          id: `tab-${t}`,
          "data-testid": `tab-${t}`,
          role: "tab",
          class: t === tab ? "active" : null,
          "aria-selected": t === tab ? "true" : "false",
        },
        label,
      ),
    ),
  );
  const content = h("section", { class: "tab-content", id: `tab-content-${tab}` });
  replace(root, h("div", { class: "crumbs" }, h("a", { href: "#/jobs" }, "Jobs"), " / ", jobId),
    head, ctx.mode === "hub" ? actions : null, panel, tabs, content);

  const state = { detail: null, stopped: false, tabCleanup: null, tabStarted: false };

  function renderHead(d) {
    const j = d.job;
    patch(
      head,
      h("h1", { id: "job-title" }, j.jobId),
      phaseBadge(j.observed.phase, { id: "job-phase", "data-testid": "job-phase",
        "data-phase": j.observed.phase }),
      h(
        "dl",
        { class: "facts" },
        field("Desired", j.desiredState, { id: "job-desired", "data-testid": "job-desired" }),
        field("Generation", String(j.generation), { id: "job-generation" }),
        field("Version", `${d.version.number} (${j.currentVersion})`, { id: "job-version" }),
        field("Lanes", String(j.lanes)),
      ),
      j.observed.cause
        ? h("div", { class: "cause", "data-testid": "job-cause" }, j.observed.cause)
        : null,
    );
  }

  async function act(what, f) {
    clearError();
    for (const b of actions.querySelectorAll("button")) b.disabled = true;
    try {
      await f();
      await refresh();
    } catch (e) {
      showError(e, what);
      await refresh();
    }
  }

  function setDesired(desiredState) {
    return act(desiredState === "running" ? "Start" : "Stop", async () => {
      // Conditional on the generation read: of two clients that read it, one wins (409).
      const generation = state.detail ? state.detail.job.generation : undefined;
      await put(paths.desiredState(jobId), { desiredState, generation });
      toast(desiredState === "running" ? `Starting ${jobId}` : `Stopping ${jobId}`);
    });
  }

  function openPanel(...children) {
    replace(panel, children, h("button", { class: "link close", onclick: closePanel }, "Cancel"));
    panel.hidden = false;
  }

  function closePanel() {
    panel.hidden = true;
    panel.replaceChildren();
  }

  function savepointPanel() {
    const name = h("input", { id: "savepoint-name", "data-testid": "savepoint-name",
      type: "text", placeholder: "before-upgrade", autocomplete: "off" });
    openPanel(
      h("h3", {}, "Take a savepoint"),
      h("p", { class: "muted" },
        "Every lane of the running job takes a savepoint; an upgrade can start from it."),
      h("label", { for: "savepoint-name" }, "Name (optional)"),
      name,
      h("button", { class: "primary", "data-testid": "savepoint-confirm",
        onclick: () => act("Savepoint", async () => {
          const body = name.value.trim() ? { name: name.value.trim() } : {};
          const accepted = await post(paths.savepoints(jobId), body);
          toast(`Savepoint ${accepted.checkpointId} requested from ${accepted.lanes} lane(s)`);
          closePanel();
        }) }, "Take savepoint"),
    );
  }

  function upgradePanel() {
    const d = state.detail;
    const savepoints = d.recoveryRecords.filter((r) => r.kind === "savepoint");
    const editor = createEditor({ id: "upgrade-sql", value: d.version.sql || "", rows: 14 });
    const select = h(
      "select",
      { id: "upgrade-savepoint", "data-testid": "upgrade-savepoint" },
      savepoints.length === 0 ? h("option", { value: "" }, "no savepoint yet: take one first") : null,
      savepoints.map((r) =>
        h("option", { value: r.checkpointId },
          `${r.savepointName || r.checkpointId} (${time(r.completedAt)})`),
      ),
    );
    // The actions of a restore into a changed job (docs/fault-tolerance.md, "Changing a job").
    const allowNew = h("input", { type: "checkbox", id: "upgrade-allow-new",
      "data-testid": "upgrade-allow-new" });
    const dropState = h("input", { type: "text", id: "upgrade-drop-state",
      "data-testid": "upgrade-drop-state", placeholder: "operator ids, comma-separated",
      autocomplete: "off" });
    const mapOperator = h("input", { type: "text", id: "upgrade-map-operator",
      "data-testid": "upgrade-map-operator", placeholder: "old=new, comma-separated",
      autocomplete: "off" });
    const report = h("div", { id: "upgrade-report", "data-testid": "upgrade-report" });
    const request = () => {
      const list = (text) => text.split(",").map((x) => x.trim()).filter((x) => x);
      const actions = {};
      if (allowNew.checked) actions.allowNewState = true;
      if (list(dropState.value).length) actions.dropState = list(dropState.value);
      const pairs = list(mapOperator.value).map((p) => p.split("=").map((x) => x.trim()));
      if (pairs.length) actions.mapOperator = Object.fromEntries(pairs);
      return { sql: editor.value(), savepointId: select.value, actions };
    };
    openPanel(
      h("h3", {}, "Upgrade"),
      h("p", { class: "muted" },
        "A new version of the stopped job, started from a savepoint of the current one. " +
        "Preview what it does with each operator's state before upgrading."),
      h("label", { for: "upgrade-savepoint" }, "Savepoint"),
      select,
      editor.root,
      h("label", {}, allowNew, " Let new stateful operators start empty"),
      h("label", { for: "upgrade-drop-state" }, "Drop the state of"),
      dropState,
      h("label", { for: "upgrade-map-operator" }, "Give an operator's state to a renamed one"),
      mapOperator,
      report,
      h("button", { "data-testid": "upgrade-preview",
        onclick: () => act("Preview", async () => {
          replace(report, renderPreview(await post(paths.upgradePreview(jobId), request())));
        }) }, "Preview state"),
      h("button", { class: "primary", "data-testid": "upgrade-confirm",
        onclick: () => act("Upgrade", async () => {
          const upgrade = await post(paths.upgrades(jobId), request());
          toast(`Upgraded to ${upgrade.toVersion}`);
          closePanel();
        }) }, "Upgrade"),
    );
  }

  function renderActions(d) {
    const j = d.job;
    const running = j.desiredState === "running";
    const applied = d.upgrades.find((u) => u.state === "applied");
    patch(
      actions,
      h("button", { id: "action-start", "data-testid": "action-start", class: "primary",
        disabled: running, onclick: () => setDesired("running") }, "Start"),
      h("button", { id: "action-stop", "data-testid": "action-stop", disabled: !running,
        onclick: () => setDesired("stopped") }, "Stop"),
      h("button", { id: "action-savepoint", "data-testid": "action-savepoint",
        disabled: !running, title: running ? null : "Only a running job takes savepoints",
        onclick: savepointPanel }, "Savepoint…"),
      h("button", { id: "action-upgrade", "data-testid": "action-upgrade",
        disabled: running, title: running ? "Stop the job first" : null,
        onclick: upgradePanel }, "Upgrade…"),
      h("button", { id: "action-rollback", "data-testid": "action-rollback",
        disabled: !applied || running,
        title: applied ? `Roll back ${applied.upgradeId} to ${applied.fromVersion}`
          : "No upgrade to roll back",
        onclick: () => act("Rollback", async () => {
          const r = await post(paths.rollback(jobId, applied.upgradeId));
          toast(`Rolled back to ${r.fromVersion}`);
        }) }, "Roll back"),
    );
  }

  const current = () => state.detail;

  function renderTab(d) {
    if (tab === "sql") {
      if (!state.tabStarted) {
        const sql = d.version.sql;
        replace(
          content,
          sql
            ? createEditor({ id: "version-sql", value: sql, readOnly: true, rows: 30 }).root
            : h("pre", { class: "code-block" }, JSON.stringify(d.version.spec, null, 2)),
        );
        state.tabStarted = true;
      }
    } else if (!state.tabStarted) {
      state.tabStarted = true;
      const render = { overview: renderOverview, graph: renderGraph, metrics: renderMetrics,
        checkpoints: renderCheckpoints };
      state.tabCleanup = render[tab](content, d, ctx, current, params) || null;
    }
  }

  let failures = 0;
  async function refresh() {
    try {
      const d = await get(paths.detail(jobId));
      failures = 0;
      if (state.stopped) return;
      state.detail = d;
      renderHead(d);
      if (ctx.mode === "hub") renderActions(d);
      renderTab(d);
    } catch (e) {
      // A failed request is shown; a bug in the drawing is left to the console.
      if (!(e instanceof ApiError)) throw e;
      failures += 1;
      if (state.stopped) return;
      if (e instanceof ApiError && e.status === 404 && !state.detail) {
        replace(content, h("p", { class: "empty" }, `No job ${jobId}.`));
        return;
      }
      // The Hub being down is said in the top bar, not in the banner.
      if (failures === 1 && e.status !== 0) showError(e, "Reading the job");
    }
  }
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => {
    state.stopped = true;
    clearInterval(timer);
    if (state.tabCleanup) state.tabCleanup();
  };
}

/** An upgrade preview: what the restore does with each operator's state, and why. */
function renderPreview(p) {
  if (!p.logicChanged) {
    return h("p", { class: "muted", "data-verdict": "same-logic" },
      "The job's logic is the same: every operator's state is restored.");
  }
  return [
    h("p", { "data-allowed": String(p.allowed) },
      p.allowed ? "The upgrade would be accepted:" : "The upgrade would be refused:"),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Operator"), h("th", {}, "Type"),
        h("th", {}, "State"), h("th", {}, "Why"))),
      h("tbody", {}, p.operators.map((c) =>
        h("tr", { key: c.operatorId, "data-verdict": c.verdict },
          h("td", { class: "mono" }, c.operatorId + (c.was ? ` (was ${c.was})` : "")),
          h("td", {}, c.typeName),
          h("td", { class: c.verdict === "refused" ? "bad" : null }, c.verdict),
          h("td", {}, c.detail))))),
  ];
}
