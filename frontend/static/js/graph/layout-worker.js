// The graph's layout, off the page's main thread (a module worker started by
// graph/layout.js). A job is plain data: the nodes' ids and seqs (and, for
// dagre, their captions), the edges' ends, as typed arrays; the answer is the
// nodes' positions in the same order, transferred back.
//
//   { job, mode: "timeline" | "dagre", ids, seqs, sources, targets, captions?, ranker? }
//   -> { job, xs, ys } | { job, error }
//
// dagre comes from the page's import map: a worker has no import map, so the
// page passes the resolved URL as this module's `?dagre=` parameter.
import { timelinePositions } from "./timeline.js";

const DAGRE_URL = new URL(self.location.href).searchParams.get("dagre");
// As the stylesheet draws a small graph's nodes (graph-style.js): 30 px, an
// 11 px caption under it, cut at 130 px. dagre needs each node's box with its
// caption, as cytoscape-dagre's `nodeDimensionsIncludeLabels` gave it.
const NODE = 30;
const FONT = "11px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
const CAPTION_MAX = 130;
const CAPTION_HEIGHT = 4 + 13 + 2;

let dagre = null;
let measure = null;

self.onmessage = async ({ data: job }) => {
  try {
    const nodes = Array.from(job.ids, (id, index) => ({ id, seq: job.seqs[index] }));
    const edges = Array.from(job.sources, (source, index) => ({ source, target: job.targets[index] }));
    const positions = job.mode === "dagre" ? await dagrePositions(nodes, edges, job) : timelinePositions(nodes, edges);
    const xs = new Float64Array(nodes.length);
    const ys = new Float64Array(nodes.length);
    nodes.forEach((node, index) => {
      const position = positions.get(node.id);
      xs[index] = position.x;
      ys[index] = position.y;
    });
    self.postMessage({ job: job.job, xs, ys }, [xs.buffer, ys.buffer]);
  } catch (error) {
    self.postMessage({ job: job.job, error: String(error?.message || error) });
  }
};

// The layered drawing of cytoscape-dagre's `dagre` layout with graph-style.js's
// options (left to right, nodes and edges added in seq order).
async function dagrePositions(nodes, edges, { captions, ranker }) {
  dagre ??= (await import(DAGRE_URL)).default;
  const graph = new dagre.graphlib.Graph({ multigraph: true });
  graph.setGraph({ rankdir: "LR", ranker, nodesep: 16, ranksep: 50, edgesep: 6 });
  graph.setDefaultEdgeLabel(() => ({}));
  const order = nodes.map((node, index) => ({ ...node, caption: captions[index] })).sort((a, b) => a.seq - b.seq);
  for (const node of order) {
    const key = String(node.id);
    graph.setNode(key, { width: Math.max(NODE, captionWidth(node.caption) + 2), height: NODE + CAPTION_HEIGHT, name: key });
  }
  edges.forEach((edge, index) => {
    if (!graph.hasNode(String(edge.source)) || !graph.hasNode(String(edge.target))) return;
    graph.setEdge(String(edge.source), String(edge.target), { minlen: 1, weight: 1 }, String(index));
  });
  dagre.layout(graph);
  return new Map(nodes.map((node) => [node.id, { x: graph.node(String(node.id)).x, y: graph.node(String(node.id)).y }]));
}

function captionWidth(text) {
  measure ??= new OffscreenCanvas(1, 1).getContext("2d");
  measure.font = FONT;
  return Math.min(CAPTION_MAX, measure.measureText(text).width);
}
