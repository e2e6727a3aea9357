// Where each node goes, computed in graph/layout-worker.js so the page stays
// responsive while a graph is laid out: dagre for readable graphs, the linear
// timeline layout (graph/timeline.js) past BIG_GRAPH nodes. One worker serves
// every explorer of the page; each job is answered by its number.
//
//   await layoutPositions({ nodes, edges }, { big }) -> Map(node id -> { x, y })
// over the Cytoscape elements of graph/elements.js.

let worker = null;
let jobs = 0;
const pending = new Map();

function layoutWorker() {
  if (worker) return worker;
  const url = new URL("./layout-worker.js", import.meta.url);
  // The worker has no import map: it gets dagre's URL from the page's.
  url.searchParams.set("dagre", import.meta.resolve("@dagrejs/dagre"));
  worker = new Worker(url, { type: "module" });
  worker.onmessage = ({ data }) => {
    const job = pending.get(data.job);
    pending.delete(data.job);
    if (data.error) job.reject(new Error(`The layout failed: ${data.error}`));
    else job.resolve(data);
  };
  worker.onerror = (event) => {
    // A worker that cannot start (or throws outside a job) fails every job waiting on it.
    event.preventDefault();
    for (const job of pending.values()) job.reject(new Error("The layout could not run."));
    pending.clear();
    worker.terminate();
    worker = null;
  };
  return worker;
}

export function layoutPositions({ nodes, edges }, { big }) {
  const job = {
    job: (jobs += 1),
    mode: big ? "timeline" : "dagre",
    ids: Float64Array.from(nodes, (node) => node.data.mid),
    seqs: Float64Array.from(nodes, (node) => node.data.seq),
    sources: Float64Array.from(edges, (edge) => Number(edge.data.source)),
    targets: Float64Array.from(edges, (edge) => Number(edge.data.target)),
  };
  if (!big) {
    job.captions = nodes.map((node) => node.data.caption);
    // `longest-path` ranks without the slower network-simplex pass and still keeps every edge pointing right.
    job.ranker = nodes.length > 150 ? "longest-path" : "network-simplex";
  }
  return new Promise((resolve, reject) => {
    pending.set(job.job, { resolve, reject });
    layoutWorker().postMessage(job, [job.ids.buffer, job.seqs.buffer, job.sources.buffer, job.targets.buffer]);
  }).then(({ xs, ys }) => new Map(nodes.map((node, index) => [node.data.id, { x: xs[index], y: ys[index] }])));
}

// Started with the page, so that it is up by the time the graph has arrived.
layoutWorker();
