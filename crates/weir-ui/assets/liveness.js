// How fresh the figures of a view are: live, stale (no new sample for a while), the job ended,
// or the Hub unreachable. Views show it instead of a "Live" that would stay over frozen figures.

import { connection } from "./api.js";
import { clock, duration } from "./format.js";

/** A sample older than this (and the job meant to run) makes the figures stale. */
export const STALE_AFTER_MS = 6000;

const ENDED = { finished: "job finished", failed: "job failed", stopped: "job stopped" };

/**
 * `{state, text}` for figures whose newest sample is at `newestMs` (Unix ms, or null), of a job
 * in observed `phase`; `lanes`: how many lanes report. States: `unreachable`, `ended`, `stale`,
 * `waiting` (no sample yet) and `live`.
 */
export function liveness(newestMs, phase, lanes) {
  const asOf = newestMs === null ? "" : `; figures as of ${clock(newestMs)}`;
  if (connection.downSince !== null) {
    const who = document.body.dataset.mode === "local" ? "Server" : "Hub";
    return { state: "unreachable", text: `${who} unreachable since ${clock(connection.downSince)}${asOf}` };
  }
  if (ENDED[phase]) {
    return { state: "ended", text: `${ENDED[phase][0].toUpperCase()}${ENDED[phase].slice(1)}${asOf}` };
  }
  if (newestMs === null) {
    return { state: "waiting", text: "No figures yet: the job is not running." };
  }
  const age = Date.now() - newestMs;
  if (age > STALE_AFTER_MS) {
    return { state: "stale", text: `Stale: no new figures for ${duration(age)}${asOf}` };
  }
  return { state: "live", text: `Live: ${lanes} lane(s)${asOf}` };
}

/** Shows `liveness(newestMs, phase, lanes)` in `element`: its text, and its state for styling. */
export function showLiveness(element, newestMs, phase, lanes) {
  const live = liveness(newestMs, phase, lanes);
  element.textContent = live.text;
  element.dataset.state = live.state;
}
