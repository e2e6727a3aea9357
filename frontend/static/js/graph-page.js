// The memory graph page: the explorer over the signed-in user's own /api/.
import { api } from "./api.js";
import { toast } from "./dom.js";
import { GraphExplorer } from "./graph.js";

const host = document.querySelector("[data-graph-page]");
const chatUrl = host.dataset.chatUrl;

const explorer = new GraphExplorer(host, {
  source: {
    graph: (filters) => api.graph(filters),
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
