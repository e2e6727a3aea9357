// The JSON API (API.md) over fetch, with the session cookie and, on every
// write, the CSRF token Django expects in the X-CSRFToken header.

export class ApiError extends Error {
  constructor(status, body) {
    const message = body?.error?.message || `The server answered HTTP ${status}.`;
    super(message);
    this.status = status;
    this.code = body?.error?.code || "http_error";
    this.fields = body?.error?.fields || {};
  }
}

export function csrfToken() {
  const cookie = document.cookie.split("; ").find((part) => part.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.slice("csrftoken=".length)) : "";
}

// The parsed body and the response itself (for its headers).
async function call(method, url, body) {
  const headers = { Accept: "application/json" };
  const options = { method, headers, credentials: "same-origin" };
  if (method !== "GET") {
    headers["X-CSRFToken"] = csrfToken();
  }
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, options);
  } catch {
    throw new ApiError(0, { error: { code: "network", message: "The server cannot be reached. Check your connection." } });
  }
  if (response.status === 401) {
    // The session ended (signed out in another tab, or expired): sign in again.
    window.location.assign(`/accounts/login/?next=${encodeURIComponent(location.pathname + location.search)}`);
  }
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, data);
  }
  return { data, response };
}

export async function request(method, url, body) {
  return (await call(method, url, body)).data;
}

// One page of a list whose body is a bare array: its items and the URL of the
// next page from the `Link` header (rel="next"), or null on the last page.
async function listPage(url) {
  const { data, response } = await call("GET", url);
  const next = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get("Link") || "");
  return { items: data, next: next ? next[1] : null };
}

// Every page of such a list, in order (each request stays one page; the whole is the caller's own).
async function allPages(url) {
  const items = [];
  for (let next = url; next; ) {
    const page = await listPage(next);
    items.push(...page.items);
    next = page.next;
  }
  return items;
}

const get = (url) => request("GET", url);
const post = (url, body) => request("POST", url, body);
const query = (params) => {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
};

export const api = {
  // Newest first; paginated like every list (Link header), read whole here.
  threads: () => allPages("/api/threads/?page_size=200"),
  // A thread with its newest page of messages; `messages_next` is the URL of the page before.
  thread: (id) => get(`/api/threads/${id}/`),
  // The page of a thread's messages at `url` (from `messages_next` or the last page's `next`), newest first.
  threadMessages: (url) => listPage(url),
  createThread: (title) => post("/api/threads/", title ? { title } : {}),
  renameThread: (id, title) => request("PATCH", `/api/threads/${id}/`, { title }),
  send: (threadId, content) => post(`/api/threads/${threadId}/messages/`, { content }),
  turn: (id) => get(`/api/turns/${id}/`),
  turnEventsUrl: (id) => `/api/turns/${id}/events/`,
  retry: (id) => post(`/api/turns/${id}/retry/`),
  message: (id) => get(`/api/messages/${id}/`),
  dependents: (id) => get(`/api/messages/${id}/dependents/`),
  graph: ({ thread, includeDeleted } = {}) =>
    get(`/api/graph/${query({ thread, include_deleted: includeDeleted ? "true" : "" })}`),
  // The ids of the same window's messages whose own words match `q`.
  graphFind: ({ thread, includeDeleted } = {}, q) =>
    get(`/api/graph/find/${query({ q, thread, include_deleted: includeDeleted ? "true" : "" })}`),
  // The newest page of the history (the list is paginated: Link header for more).
  deletions: () => get("/api/deletions/?page_size=200"),
  deletion: (id) => get(`/api/deletions/${id}/`),
  previewDeletion: (body) => post("/api/deletions/", body),
  // `choices`: {derived?, redactions?: {message id: approved text}} (docs/API.md).
  confirmDeletion: (id, choices) => post(`/api/deletions/${id}/confirm/`, choices),
  cancelDeletion: (id) => post(`/api/deletions/${id}/cancel/`),
  undoPreview: (id) => get(`/api/deletions/${id}/undo/`),
  undoDeletion: (id) => post(`/api/deletions/${id}/undo/`),
  imports: () => get("/api/imports/"),
  importJob: (id) => get(`/api/imports/${id}/`),
  importEventsUrl: (id) => `/api/imports/${id}/events/`,
  resumeDeletion: (id) => post(`/api/deletions/${id}/resume/`),
  // What MCP clients may do: {may_confirm_deletions} (docs/API.md, "MCP server").
  agentAccess: () => get("/api/agent-access/"),
  setAgentAccess: (body) => request("PUT", "/api/agent-access/", body),
  // The tokens MCP clients hold (docs/API.md, "Agent tokens"): a new one's secret comes back once.
  agentTokens: () => get("/api/agent-tokens/?page_size=200"),
  makeAgentToken: (name) => post("/api/agent-tokens/", { name }),
  revokeAgentToken: (id) => request("DELETE", `/api/agent-tokens/${id}/`),
  // The account: what erasing it takes, and its erasure (`username` typed to confirm).
  account: () => get("/api/account/"),
  eraseAccount: (username) => post("/api/account/erase/", { username }),
};

// Several messages by id (a deletion preview lists ids only), at most a few
// requests in flight. Ids that are gone or not visible come back as null.
export async function messagesById(ids, { concurrency = 6 } = {}) {
  const found = new Map();
  const queue = [...new Set(ids)];
  async function worker() {
    while (queue.length) {
      const id = queue.shift();
      try {
        found.set(id, await api.message(id));
      } catch (error) {
        if (!(error instanceof ApiError) || error.status !== 404) throw error;
        found.set(id, null);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, worker));
  return found;
}
