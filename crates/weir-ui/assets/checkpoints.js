// The Checkpoints tab: the job-level checkpoints and savepoints (recovery records), and per
// lane the epochs whose manifests retention keeps (status, duration, state size) with each
// task's alignment, and the aborted ones; clicking a record or an epoch (or Enter on its
// button) shows its manifest with the checksum the server recomputed, scrolled into view.
// Redrawn in place every 2 s, so a selected checksum stays selected.

import { ApiError, get, paths, pick } from "./api.js";
import { field, h, patch, replace, table } from "./dom.js";
import { bytes, count, dash, duration, short, time } from "./format.js";
import { unavailable } from "./metrics-data.js";

/** Job-level records shown (periodic checkpoints add one a second). */
const SHOWN = 10;

function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, status);
}

function manifestView(m, title) {
  const verified = m.verified === true;
  return h(
    "div",
    { class: "card wide manifest", "data-testid": "manifest",
      dataset: { verified: String(verified) } },
    h("h2", { tabindex: -1 }, title),
    h(
      "div",
      { class: verified ? "verified ok" : "verified bad", "data-testid": "manifest-verified" },
      verified ? "✔ checksum verified" : "✘ checksum NOT verified",
    ),
    h(
      "dl",
      { class: "facts grid2" },
      field("Path", h("span", { class: "mono", "data-testid": "manifest-path" }, m.path)),
      field("Recorded checksum", h("span", { class: "mono" }, m.checksum ?? dash)),
      field("Computed checksum", h("span", { class: verified ? "mono" : "mono bad" },
        m.computedChecksum ?? dash)),
    ),
    h("details", {}, h("summary", {}, "Manifest"),
      h("pre", { class: "code-block" }, JSON.stringify(m.manifest, null, 2))),
  );
}

function taskTable(epoch) {
  const tasks = epoch.tasks || [];
  if (tasks.length === 0) return h("p", { class: "muted" }, "No per-task figures.");
  return table(
    { class: "grid tasks", "data-testid": "epoch-tasks" },
    ["Task (head operator)", "Subtask", "State", "Entries", "Alignment", "Acknowledged after"],
    tasks.map((t) =>
      h("tr", {},
        h("td", { class: "mono" }, pick(t, "operatorId")),
        h("td", { class: "num" }, count(t.subtask)),
        h("td", { class: "num" }, bytes(pick(t, "stateBytes"))),
        h("td", { class: "num" }, count(pick(t, "stateEntries") ?? null)),
        h("td", { class: "num" }, duration(pick(t, "alignmentMs"))),
        h("td", { class: "num" }, duration(pick(t, "ackMs")))),
    ),
  );
}

function summaryView(s) {
  if (!s) return h("p", { class: "muted" }, "No checkpoint summary yet.");
  return h(
    "dl",
    { class: "facts inline" },
    field("Completed", String(pick(s, "completed") ?? dash), { "data-testid": "lane-completed" }),
    field("Aborted", count(pick(s, "aborted") ?? null)),
    field("Last durable epoch", String(pick(s, "lastDurableEpoch") ?? dash)),
    field("Last duration", duration(pick(s, "lastDurationMs"))),
    field("Last state", bytes(pick(s, "lastStateBytes"))),
    field("Restored from", String(pick(s, "restoredFrom") ?? dash)),
    field("Restarts", count(pick(s, "restarts") ?? 0)),
  );
}

/** Checkpoints the current version's retention keeps (the runtime's default: 3). */
function retainOf(detail) {
  const c = detail.version && detail.version.spec ? detail.version.spec.checkpoint : null;
  return (c && c.retain) || 3;
}

/** A button in a row's first cell: the row acts on click, the button also on Enter/Space. */
const rowButton = (label, onclick, attrs = {}) =>
  h("button", { class: "link cell-button", onclick: (e) => { e.stopPropagation(); onclick(); },
    ...attrs }, label);

export function renderCheckpoints(root, detail, ctx) {
  const jobId = detail.job.jobId;
  const records = h("div", { class: "card wide" });
  const lanes = h("div", { id: "lanes-checkpoints" });
  const manifest = h("div", { id: "manifest-view" });
  replace(root, manifest, lanes, records);
  let selected = null; // {kind: "record", id} | {kind: "epoch", lane, epoch}
  let stopped = false;
  let failures = 0;

  /** Brings the manifest into view and focuses its heading (keyboard users land there). */
  function reveal() {
    manifest.scrollIntoView({ block: "start", behavior: "smooth" });
    const heading = manifest.querySelector("h2");
    if (heading) heading.focus({ preventScroll: true });
  }

  async function showManifest(target, title) {
    selected = target;
    replace(manifest, h("p", { class: "muted" }, "Reading the manifest…"));
    reveal();
    try {
      const m = target.kind === "record"
        ? await get(paths.recordManifest(jobId, target.id))
        : await get(paths.epochManifest(jobId, target.lane, target.epoch));
      if (!stopped) replace(manifest, manifestView(m, title));
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (target.kind === "epoch" && e.status === 404 && !e.message.includes("no endpoint")) {
        // Listed as kept when the page last read, deleted since by retention after newer
        // checkpoints completed.
        replace(manifest, h("div", { class: "card wide manifest", "data-testid": "manifest-deleted" },
          h("h2", { tabindex: -1 }, title),
          h("p", { class: "verified bad" }, "Deleted by retention"),
          h("p", {}, `Checkpoint retention deleted this epoch's manifest after newer ` +
            `checkpoints completed (it keeps the newest ${retainOf(detail)} and every ` +
            `savepoint). The Hub said: ${e.message}`)));
      } else {
        const note = unavailable(e, "Manifests");
        replace(manifest, note || h("p", { class: "empty" }, `The manifest cannot be read: ${e.describe()}`));
      }
    }
    reveal();
    refresh();
  }

  function renderRecords(list) {
    patch(
      records,
      h("h2", {}, "Job-level checkpoints and savepoints"),
      ctx.mode === "local"
        ? h("p", { class: "muted" }, "A local run has no job-level records.")
        : list.length === 0
          ? h("p", { class: "muted" }, "None yet.")
          : h("div", {}, list.length > SHOWN
            ? h("p", { class: "muted" }, `The newest ${SHOWN} of ${list.length}.`) : null,
          table(
            { class: "grid", id: "records-table" },
            ["Checkpoint", "Kind", "Name", "Version", "Generation", "Lane epochs", "Completed",
              "Checksum"],
            list.slice(0, SHOWN).map((r) => {
              const open = () => showManifest({ kind: "record", id: r.checkpointId },
                `Manifest of ${r.kind} ${r.savepointName || r.checkpointId}`);
              return h("tr", {
                "data-testid": "record-row",
                key: r.checkpointId,
                dataset: { checkpointId: r.checkpointId },
                class: selected && selected.kind === "record" && selected.id === r.checkpointId
                  ? "clickable selected" : "clickable",
                title: "Show the manifest",
                onclick: open,
              },
              h("td", { class: "mono" }, rowButton(short(r.checkpointId, 18), open,
                { "aria-label": `Show the manifest of ${r.checkpointId}` })),
              h("td", {}, r.kind),
              h("td", {}, r.savepointName || dash),
              h("td", { class: "mono" }, r.versionId),
              h("td", { class: "num" }, r.generation),
              h("td", { class: "mono" }, Object.entries(r.laneEpochs)
                .map(([lane, e]) => `${lane}:${e}`).join(" ")),
              h("td", {}, time(r.completedAt)),
              h("td", { class: "mono", title: r.checksum }, short(r.checksum, 12)));
            }),
          )),
    );
  }

  function epochsTable(l, epochs) {
    return table(
      { class: "grid", "data-testid": "lane-epochs" },
      ["Epoch", "Kind", "Status", "Triggered", "Duration", "State", "Tasks", "Max alignment"],
      epochs.flatMap((e) => {
        const isSelected = selected && selected.kind === "epoch" &&
          selected.lane === l.lane && selected.epoch === e.epoch;
        const tasks = e.tasks || [];
        const maxAlign = tasks.reduce((m, t) => Math.max(m, pick(t, "alignmentMs") ?? 0), 0);
        const open = () => showManifest({ kind: "epoch", lane: l.lane, epoch: e.epoch },
          `Manifest of lane ${l.lane}, epoch ${e.epoch}`);
        const row = h("tr", {
          "data-testid": "epoch-row",
          key: `${l.lane}#${e.epoch}`,
          dataset: { epoch: e.epoch, status: e.status, lane: l.lane },
          class: isSelected ? "clickable selected" : "clickable",
          title: "Show the manifest and the tasks",
          onclick: open,
        },
        h("td", { class: "num" }, rowButton(String(e.epoch), open,
          { "aria-label": `Show the manifest of epoch ${e.epoch}` })),
        h("td", {}, e.kind),
        h("td", {}, statusBadge(e.status)),
        h("td", {}, time(pick(e, "triggeredAtMs"))),
        h("td", { class: "num" }, duration(pick(e, "durationMs"))),
        h("td", { class: "num" }, bytes(pick(e, "stateBytes"))),
        h("td", { class: "num" }, count(tasks.length)),
        h("td", { class: "num" }, duration(maxAlign)));
        if (!isSelected) return [row];
        return [row, h("tr", { class: "expanded", key: `${l.lane}#${e.epoch}#tasks` },
          h("td", { colspan: 8 }, taskTable(e)))];
      }),
    );
  }

  function abortedTable(aborted) {
    return [
      h("h3", { class: "spaced" }, "Aborted epochs (no manifest)"),
      table({ class: "grid", "data-testid": "aborted-epochs" },
        ["Epoch", "Kind", "Triggered", "After", "Cause"],
        aborted.map((e) => h("tr", { key: e.epoch },
          h("td", { class: "num" }, e.epoch), h("td", {}, e.kind),
          h("td", {}, time(pick(e, "triggeredAtMs"))),
          h("td", { class: "num" }, duration(pick(e, "durationMs"))),
          h("td", { class: "cause" }, e.cause || dash)))),
    ];
  }

  function renderLanes(list) {
    if (list.length === 0) {
      patch(lanes, h("div", { class: "card wide" }, h("h2", {}, "Epochs"),
        h("p", { class: "muted" }, "No lane runs: start the job to take checkpoints.")));
      return;
    }
    patch(
      lanes,
      list.map((l) => {
        const all = [...(l.epochs || [])].reverse();
        const kept = new Set(l.retained || []);
        const epochs = all.filter((e) => kept.has(e.epoch));
        const aborted = all.filter((e) => e.status !== "completed");
        const deleted = all.length - epochs.length - aborted.length;
        return h(
          "div",
          { class: "card wide", "data-testid": "lane-checkpoints", key: l.lane,
            dataset: { lane: l.lane } },
          h("h2", {}, `Lane ${l.lane}`),
          summaryView(l.summary),
          epochs.length === 0
            ? h("p", { class: "muted", "data-testid": "no-epochs" }, "No completed epoch yet.")
            : epochsTable(l, epochs),
          deleted > 0
            ? h("p", { class: "muted", "data-testid": "epochs-deleted" },
              `${count(deleted)} older completed epoch${deleted === 1 ? "" : "s"} of this run ` +
              `not listed: checkpoint retention deleted their manifests (it keeps the newest ` +
              `${retainOf(detail)} checkpoints and every savepoint).`)
            : null,
          aborted.length ? abortedTable(aborted) : null,
        );
      }),
    );
  }

  async function refresh() {
    try {
      const c = await get(paths.checkpoints(jobId));
      failures = 0;
      if (stopped) return;
      renderRecords(c.records || []);
      renderLanes(c.lanes || []);
    } catch (e) {
      // A failed request is shown; a bug in the drawing is left to the console.
      if (!(e instanceof ApiError)) throw e;
      failures += 1;
      if (stopped || failures > 1) return;
      const note = unavailable(e, "Checkpoints");
      if (note) {
        replace(lanes);
        replace(records, note);
      }
    }
  }
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
