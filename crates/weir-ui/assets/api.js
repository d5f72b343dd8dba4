// The Hub's JSON API (same origin). Errors are `ApiError`s carrying the Hub's
// `{"error", "field"}` body. Every request sends `Authorization: Bearer <token>` when a token is
// stored in sessionStorage (`weir.token`); a 401 asks for a token (auth.js) and retries. Whether
// the Hub answers is tracked in `connection`.

const TOKEN_KEY = "weir.token";

/** The stored token, or null. */
export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** What a refused request would have done, for a 403's notice. */
function actionOf(method, path) {
  if (method === "GET") return `read ${path}`;
  if (path.endsWith("/desired-state")) return "start or stop jobs";
  if (path.endsWith("/savepoints")) return "take savepoints";
  if (path.endsWith("/rollback")) return "roll back upgrades";
  if (path.endsWith("/upgrades")) return "upgrade jobs";
  if (path.endsWith("/upgrades/preview")) return "preview upgrades";
  if (path.endsWith("/validate")) return "validate jobs";
  if (path === "/api/v1/jobs") return "submit jobs";
  return `${method} ${path}`;
}

export class ApiError extends Error {
  constructor(status, body, method, path) {
    const message = (body && body.error) || `HTTP ${status}`;
    super(message);
    this.status = status;
    this.field = body && body.field ? body.field : null;
    this.method = method;
    this.path = path;
  }

  /** "HTTP 409: message (field `generation`)"; a 403 says the token's role may not act. */
  describe() {
    if (this.status === 403) {
      return `HTTP 403: your token's role (viewer/operator/admin) may not ` +
        `${actionOf(this.method, this.path)}: ${this.message}`;
    }
    const field = this.field && this.field !== "$" ? ` (field \`${this.field}\`)` : "";
    return `${this.status === 0 ? "" : `HTTP ${this.status}: `}${this.message}${field}`;
  }
}

/** Whether the Hub answers: `downSince` (ms) is when it stopped, null while it answers. */
export const connection = { downSince: null };
const watchers = new Set();

/** Calls `fn(connection)` whenever the Hub stops or starts answering. */
export function onConnection(fn) {
  watchers.add(fn);
  return () => watchers.delete(fn);
}

function reachable(ok) {
  const down = ok ? null : (connection.downSince ?? Date.now());
  if (down === connection.downSince) return;
  connection.downSince = down;
  for (const fn of watchers) fn(connection);
}

let askForToken = null;

/** `ask(reason)` resolves once the user stored a token (auth.js installs the form). */
export function setTokenPrompt(ask) {
  askForToken = ask;
}

async function send(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const sent = token();
  if (sent) init.headers.Authorization = `Bearer ${sent}`;
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    reachable(false);
    throw new ApiError(0, { error: `the Hub cannot be reached: ${e.message}` }, method, path);
  }
  reachable(true);
  const text = await response.text();
  let decoded = null;
  if (text) {
    try {
      decoded = JSON.parse(text);
    } catch {
      decoded = { error: text.slice(0, 500) };
    }
  }
  return { status: response.status, ok: response.ok, decoded, sent };
}

/** `method path` with an optional JSON body; resolves to the decoded answer. */
export async function api(method, path, body) {
  for (;;) {
    const answer = await send(method, path, body);
    if (answer.status === 401 && askForToken) {
      // A token the Hub refuses is forgotten; the request goes again with the new one.
      if (answer.sent && token() === answer.sent) clearToken();
      const why = (answer.decoded && answer.decoded.error) || "the Hub asks for a token";
      await askForToken(answer.sent ? `The Hub refused the token: ${why}` : why);
      continue;
    }
    if (!answer.ok) throw new ApiError(answer.status, answer.decoded, method, path);
    return answer.decoded;
  }
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body ?? {});
export const put = (path, body) => api("PUT", path, body);

const enc = encodeURIComponent;

/** Paths of the endpoints the workbench reads. */
export const paths = {
  config: "/api/v1/ui/config",
  jobs: "/api/v1/jobs",
  validate: "/api/v1/jobs/validate",
  agents: "/api/v1/agents",
  job: (id) => `/api/v1/jobs/${enc(id)}`,
  detail: (id) => `/api/v1/jobs/${enc(id)}/detail`,
  desiredState: (id) => `/api/v1/jobs/${enc(id)}/desired-state`,
  savepoints: (id) => `/api/v1/jobs/${enc(id)}/savepoints`,
  upgrades: (id) => `/api/v1/jobs/${enc(id)}/upgrades`,
  upgradePreview: (id) => `/api/v1/jobs/${enc(id)}/upgrades/preview`,
  rollback: (id, upgrade) => `/api/v1/jobs/${enc(id)}/upgrades/${enc(upgrade)}/rollback`,
  /** `query`: `{since, last}`, each optional. */
  metrics: (id, query = {}) => {
    const q = Object.entries(query).filter(([, v]) => v !== null && v !== undefined);
    return `/api/v1/jobs/${enc(id)}/metrics${q.length ? `?${new URLSearchParams(q)}` : ""}`;
  },
  checkpoints: (id) => `/api/v1/jobs/${enc(id)}/checkpoints`,
  recordManifest: (id, checkpoint) =>
    `/api/v1/jobs/${enc(id)}/checkpoints/${enc(checkpoint)}/manifest`,
  epochManifest: (id, lane, epoch) =>
    `/api/v1/jobs/${enc(id)}/lanes/${enc(lane)}/epochs/${enc(epoch)}/manifest`,
};

/** The workbench's mode: `{mode: "hub" | "local", jobId}` (`weir run --ui` is local). */
export async function config() {
  const c = await get(paths.config);
  return { mode: c && c.mode === "local" ? "local" : "hub", jobId: c ? c.jobId ?? null : null };
}

/** Field `name` of a runtime reading `obj` (which may be missing). */
export function pick(obj, name) {
  return obj ? obj[name] : undefined;
}
