// The memory graph page: the explorer over the signed-in user's own /api/.
import { api } from "./api.js";
import { toast } from "./dom.js";

// The whole graph is asked for first, while the explorer's modules (Cytoscape
// the largest) are still loading: the request and the download overlap.
const WHOLE = { thread: "", includeDeleted: false };
let early = api.graph(WHOLE);
early.catch(() => {}); // its error is the first load's to show
const { GraphExplorer } = await import("./graph.js");

const host = document.querySelector("[data-graph-page]");
const chatUrl = host.dataset.chatUrl;

function graph(filters) {
  const answer = early && filters.thread === WHOLE.thread && filters.includeDeleted === WHOLE.includeDeleted ? early : api.graph(filters);
  early = null;
  return answer;
}

const explorer = new GraphExplorer(host, {
  source: {
    graph,
    find: (filters, words) => api.graphFind(filters, words).then((found) => found.ids),
    threads: () => api.threads(),
    message: (id) => api.message(id),
    dependents: (id) => api.dependents(id),
    previewDeletion: (body) => api.previewDeletion(body),
    confirmDeletion: (id, choices) => api.confirmDeletion(id, choices),
    deletion: (id) => api.deletion(id),
    undoDeletion: (id) => api.undoDeletion(id),
    cancelDeletion: (id) => api.cancelDeletion(id),
    undoPreview: (id) => api.undoPreview(id),
  },
  links: {
    chat: (message) => `${chatUrl}?thread=${message.thread}#m-${message.id}`,
    deletions: host.dataset.deletionsUrl,
  },
});

const focus = Number(new URLSearchParams(location.search).get("focus"));
explorer
  .load()
  .then(() => {
    if (focus) explorer.select(focus, { center: true });
  })
  .catch((error) => toast(error.message, { kind: "error" }));
