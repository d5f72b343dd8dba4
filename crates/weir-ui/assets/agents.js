// The Agents view: id, lease state and expiry, session, capabilities, assigned lanes.

import { ApiError, get, paths } from "./api.js";
import { h, patch, replace, table } from "./dom.js";
import { relative, short, time } from "./format.js";
import { showError } from "./notices.js";

export function renderAgents(root) {
  const body = h("div", { id: "agents-body" }, h("p", { class: "muted" }, "Loading…"));
  replace(root, h("div", { class: "page-head" }, h("h1", {}, "Agents")), body);
  let stopped = false;
  let failures = 0;
  async function refresh() {
    try {
      const agents = await get(paths.agents);
      failures = 0;
      if (stopped) return;
      if (agents.length === 0) {
        patch(body, h("div", { class: "empty", "data-testid": "no-agents" },
          h("p", {}, "No Agent has registered."),
          h("p", { class: "muted" }, "Start one: weir agent --hub http://HOST:PORT --id agent-1")));
        return;
      }
      patch(
        body,
        table(
          { id: "agents-table", class: "grid" },
          ["Agent", "Lease", "Lease expires", "Session", "Runtime", "Slots", "State backends",
            "Checkpoint protocol", "Assigned lanes", "Registered"],
          agents.map((a) => {
            const c = a.capabilities;
            const assigned = Array.isArray(a.assigned)
              ? (a.assigned.length === 0
                ? h("span", { class: "muted" }, "none")
                : h("ul", { class: "plain" }, a.assigned.map((x) =>
                  h("li", {}, h("a", { href: `#/jobs/${encodeURIComponent(x.jobId)}` }, x.jobId),
                    ` lane ${x.lane} · gen ${x.generation}`,
                    x.state ? h("span", { class: `badge lane-${x.state}` }, x.state) : null))))
              : `${a.lanes} lane${a.lanes === 1 ? "" : "s"}`;
            return h("tr", { "data-testid": "agent-row", key: a.agentId, dataset: { agentId: a.agentId } },
              h("td", { class: "mono" }, a.agentId),
              h("td", {}, h("span", { class: `badge lease-${a.state}` }, a.state)),
              h("td", { title: time(a.leaseExpiresAt) }, relative(a.leaseExpiresAt)),
              h("td", { class: "mono", title: `session ${a.sessionId}, boot ${a.bootId}` },
                short(a.sessionId, 13)),
              h("td", {}, c.runtimeVersion),
              h("td", { class: "num" }, `${a.lanes} / ${c.slots}`),
              h("td", {}, c.stateBackends.join(", ")),
              h("td", { class: "num" }, c.checkpointProtocol),
              h("td", {}, assigned),
              h("td", {}, time(a.registeredAt)));
          }),
        ),
      );
    } catch (e) {
      // A failed request is shown; a bug in the drawing is left to the console.
      if (!(e instanceof ApiError)) throw e;
      failures += 1;
      if (failures === 1 && e.status !== 0) showError(e, "Listing the Agents");
    }
  }
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
