// Loading the explorer's data: the thread filter's options (once), the graph
// for the current filters, and the "ready" signal once it is drawn
// (host[data-ready], the explorer:ready event, and x.timings in ms: fetch,
// layout in the worker, draw (Cytoscape's set-up), interactive = from the
// load's start to the first frame drawn with every node at its place, the
// tap handlers bound).
import { search } from "./search.js";
import { render, showNotice } from "./view.js";

export async function load(x, { keepView = false } = {}) {
  const started = performance.now();
  // A newer load (a filter changed meanwhile) supersedes this one.
  const generation = (x.generation += 1);
  x.host.dataset.ready = "false";
  x.closePanel();
  if (x.source.threads && x.dom.needsThreads()) {
    x.source
      .threads()
      .then((threads) => x.dom.addThreads(threads))
      .catch(() => {});
  }
  let graph;
  try {
    graph = await x.source.graph(x.filters);
  } catch (error) {
    showNotice(x, `The graph could not be loaded: ${error.message}`);
    return;
  }
  if (generation !== x.generation) return;
  const fetched = performance.now();
  let drawn;
  try {
    drawn = await render(x, graph, { keepView, generation });
  } catch (error) {
    showNotice(x, error.message);
    return;
  }
  if (!drawn) return;
  if (graph.truncated && graph.total > graph.nodes.length) {
    // The API opens a heavy history as a window of its newest messages.
    showNotice(x, `Showing the newest ${graph.nodes.length} of ${graph.total} messages: pick a thread to focus on it.`);
  }
  if (x.dom.searchInput.value) search(x, x.dom.searchInput.value);
  x.timings = { fetch: Math.round(fetched - started), ...x.timings };
  return ready(x, started);
}

// Resolves once the first frame with the new graph is drawn.
function ready(x, started) {
  return new Promise((resolve) => {
    requestAnimationFrame(() =>
      requestAnimationFrame(() => {
        x.timings.interactive = Math.round(performance.now() - started);
        x.host.dataset.ready = "true";
        x.host.dispatchEvent(new CustomEvent("explorer:ready", { detail: x.timings }));
        resolve(x.timings);
      }),
    );
  });
}
