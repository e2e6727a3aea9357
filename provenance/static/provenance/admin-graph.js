// The admin's per-user provenance graph: the browser's explorer component,
// read-only, over staff-only JSON endpoints that answer like /api/.
import { GraphExplorer } from "../js/graph.js";

const host = document.querySelector("[data-admin-graph]");

async function get(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error(body?.error?.message || `The server answered HTTP ${response.status}.`);
  return body;
}

const explorer = new GraphExplorer(host, {
  readOnly: true,
  source: {
    graph: ({ thread, includeDeleted }) => {
      const query = new URLSearchParams({ include_deleted: includeDeleted ? "true" : "false" });
      if (thread) query.set("thread", thread);
      return get(`${host.dataset.elementsUrl}?${query}`);
    },
    threads: () => get(host.dataset.threadsUrl),
    message: (id) => get(host.dataset.messageUrl.replace(/\/0\/$/, `/${id}/`)),
  },
});

explorer.load();
