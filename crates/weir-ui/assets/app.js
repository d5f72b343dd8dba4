// The workbench's shell: reads the mode, then routes `#/...` to a view. A view is
// `render(root, params, ctx)` returning a cleanup function (stops its timers).

import { config, connection, onConnection } from "./api.js";
import { installAuth } from "./auth.js";
import { replace } from "./dom.js";
import { clock } from "./format.js";
import { clearError, showError } from "./notices.js";
import { renderJobs } from "./jobs.js";
import { renderNewJob } from "./newjob.js";
import { renderJob } from "./job.js";
import { renderAgents } from "./agents.js";

const ctx = { mode: "hub", jobId: null };
let cleanup = null;

/** `#/jobs`, `#/new`, `#/jobs/<id>[/<tab>[/<operator>]]`, `#/agents`. */
function parse(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "new" && ctx.mode === "hub") return { view: "new" };
  if (parts[0] === "agents" && ctx.mode === "hub") return { view: "agents" };
  if (parts[0] === "jobs" && parts[1]) {
    return { view: "job", jobId: parts[1], tab: parts[2] || "overview", operator: parts[3] };
  }
  if (ctx.mode === "local" && ctx.jobId && parts.length === 0) {
    return { view: "job", jobId: ctx.jobId, tab: "overview" };
  }
  return { view: "jobs" };
}

function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const root = document.getElementById("view");
  const r = parse(location.hash);
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === (r.view === "job" ? "jobs" : r.view));
  }
  const views = { jobs: renderJobs, new: renderNewJob, job: renderJob, agents: renderAgents };
  replace(root);
  cleanup = views[r.view](root, r, ctx) || null;
}

/** The top bar's "Hub unreachable since ..." while requests fail to reach it. */
function showConnection() {
  const el = document.getElementById("conn");
  el.hidden = connection.downSince === null;
  el.textContent = connection.downSince === null ? ""
    : `${ctx.mode === "local" ? "Server" : "Hub"} unreachable since ${clock(connection.downSince)}`;
}

async function main() {
  installAuth();
  onConnection(showConnection);
  try {
    Object.assign(ctx, await config());
  } catch (e) {
    showError(e, "Reading the workbench's configuration");
  }
  document.body.dataset.mode = ctx.mode;
  document.getElementById("mode").textContent =
    ctx.mode === "local" ? "local run · read-only" : "Hub";
  for (const el of document.querySelectorAll("[data-hub-only]")) el.hidden = ctx.mode !== "hub";
  window.addEventListener("hashchange", () => {
    clearError();
    route();
  });
  route();
}

main();
