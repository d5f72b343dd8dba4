// The Hub's JSON API (same origin). Errors are `ApiError`s carrying the Hub's
// `{"error", "field"}` body.

export class ApiError extends Error {
  constructor(status, body, method, path) {
    const message = (body && body.error) || `HTTP ${status}`;
    super(message);
    this.status = status;
    this.field = body && body.field ? body.field : null;
    this.method = method;
    this.path = path;
  }

  /** "PUT /api/v1/...: 409: message (field `generation`)". */
  describe() {
    const field = this.field && this.field !== "$" ? ` (field \`${this.field}\`)` : "";
    return `${this.status === 0 ? "" : `HTTP ${this.status}: `}${this.message}${field}`;
  }
}

/** `method path` with an optional JSON body; resolves to the decoded answer. */
export async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, { error: `the Hub cannot be reached: ${e.message}` }, method, path);
  }
  const text = await response.text();
  let decoded = null;
  if (text) {
    try {
      decoded = JSON.parse(text);
    } catch {
      decoded = { error: text.slice(0, 500) };
    }
  }
  if (!response.ok) throw new ApiError(response.status, decoded, method, path);
  return decoded;
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
