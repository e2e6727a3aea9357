// /api/graph/ elements -> Cytoscape elements: string ids (Cytoscape's), the
// numeric id kept as `mid`, the labels drawn under each node, whether a reply
// used tool results (`used_tools`), and each edge's width from its score (0.6 to 5 px).
import { snippet } from "../dom.js";

export function toElements(graph) {
  // A reply written after tool results (tool-steps.js): known from the edges here, since a big graph's
  // edges are not Cytoscape's (graph/edge-layer.js).
  const usedTools = new Set(graph.edges.filter(({ data }) => data.signal === "tool").map(({ data }) => data.target));
  const nodes = graph.nodes.map(({ data }) => {
    const text = data.label.includes(": ") ? data.label.slice(data.label.indexOf(": ") + 2) : "";
    return {
      group: "nodes",
      data: {
        ...data,
        id: String(data.id),
        mid: data.id,
        short: `#${data.seq}`,
        imported: data.imported_from ? "yes" : "no",
        used_tools: data.role === "assistant" && usedTools.has(data.id),
        caption: data.status === "purged" ? `#${data.seq} purged` : `#${data.seq} ${snippet(text, 26)}`,
      },
    };
  });
  const edges = graph.edges.map(({ data }) => ({
    group: "edges",
    data: { ...data, source: String(data.source), target: String(data.target), width: edgeWidth(data.score) },
  }));
  return { nodes, edges };
}

function edgeWidth(score) {
  return 0.6 + 4.4 * Math.min(1, Math.max(0, Number(score) || 0));
}

// A node's caption without its "#12 " prefix, for lists that show the seq apart.
export function captionText(node) {
  // A node the graph does not show (a removed one, "Show deleted" off) is an empty collection.
  return node?.length ? node.data("caption").replace(/^#\d+ /, "") : "";
}
