// How the provenance graph looks and is laid out. Time flows left to right:
// every edge goes from an older message to a newer one.
import cytoscape from "cytoscape";
import dagre from "cytoscape-dagre";

cytoscape.use(dagre);

// Past this many nodes the graph switches to its fast path: the timeline
// layout (graph/timeline.js) instead of dagre, its edges drawn as straight
// lines on the explorer's own layer (graph/edge-layer.js) rather than as
// Cytoscape elements (a focused neighbourhood's are elements again, haystack
// lines without arrowheads), and short labels drawn only on the nodes in view
// once zoomed in (graph/view.js adds `labelled`). Measured in
// tests/provenance/graph/test_graph_bench_browser.py and `make bench` (lab/bench/live.py).
export const BIG_GRAPH = 400;

// Zoomed out past this, a big graph's labels would be too small to read
// (11 px under `min-zoomed-font-size` 9): none is laid out at all.
export const LABEL_ZOOM = 9 / 11;

const COLORS = {
  user: "#4f46e5",
  assistant: "#0d9488",
  summary: "#b45309",
  system: "#475569",
  removed: "#cbd5e1",
  danger: "#dc2626",
  dangerDark: "#7f1d1d",
  focus: "#f59e0b",
  edge: "#94a3b8",
  imported: "#7c3aed",
  toolCall: "#ea580c",
  toolResult: "#0891b2",
  note: "#be185d",
  fact: "#15803d",
};

// How a big graph's edges look on the explorer's own edge layer
// (graph/edge-layer.js), as the stylesheet below draws a small graph's: the
// same colours and opacities, and the same order (a fact's look wins over a
// tool step's, which wins over a first-ranked one's, which wins over an agent's).
export const EDGE_LOOKS = {
  plain: { color: COLORS.edge, opacity: 0.55 },
  agent: { color: COLORS.note, opacity: 0.55, width: 1.5, dashed: true },
  first: { color: "#64748b", opacity: 0.8 },
  tool: { color: COLORS.toolCall, opacity: 0.9, dashed: true },
  fact: { color: COLORS.fact, opacity: 0.8, dashed: true },
  faded: { opacity: 0.06 },
  dep: { color: COLORS.danger, opacity: 0.9 },
};

// One edge's look on the edge layer: its width (from graph/elements.js) to the
// half pixel, so that a few thousand edges share a dozen looks, one path each.
export function edgeLook(data) {
  const look = { ...EDGE_LOOKS.plain, width: Math.max(0.5, Math.round(data.width * 2) / 2), dashed: false };
  if (data.signal === "agent") Object.assign(look, EDGE_LOOKS.agent);
  if (data.rank === 0) Object.assign(look, EDGE_LOOKS.first);
  if (data.signal === "tool") Object.assign(look, EDGE_LOOKS.tool);
  if (data.signal === "fact") Object.assign(look, EDGE_LOOKS.fact);
  look.key = `${look.color} ${look.opacity} ${look.width} ${look.dashed}`;
  return look;
}

// How labels are drawn under the nodes. A big graph sets them only on the
// nodes in view when zoomed in (`labelled`): every property of a matching rule
// is applied to each element and every label measured, so the thousands of
// nodes out of reading size carry none of them.
function labels({ big }) {
  return {
    label: big ? "data(short)" : "data(caption)",
    "font-family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
    "font-size": 11,
    color: "#1f2937",
    "text-valign": "bottom",
    "text-margin-y": 4,
    // Ellipsis needs each label measured: only affordable on small graphs.
    "text-wrap": big ? "none" : "ellipsis",
    "text-max-width": 130,
    "text-background-color": "#ffffff",
    "text-background-opacity": big ? 0 : 0.8,
    "text-background-padding": 1,
    "min-zoomed-font-size": big ? 9 : 5,
  };
}

export function stylesheet({ big }) {
  // A big graph's edges are straight haystack lines without arrowheads (time flows left to right).
  const arrow = (color) => (big ? {} : { "target-arrow-color": color });
  return [
    {
      selector: "node",
      style: {
        width: 30,
        height: 30,
        "background-color": COLORS.assistant,
        ...(big ? {} : labels({ big })),
        "border-width": 0,
        "border-color": "#ffffff",
      },
    },
    ...(big ? [{ selector: "node.labelled", style: labels({ big }) }] : []),
    { selector: 'node[role = "user"]', style: { shape: "round-rectangle", "background-color": COLORS.user } },
    { selector: 'node[role = "summary"]', style: { shape: "diamond", "background-color": COLORS.summary } },
    // A client's system prompt: an input of every reply it shaped, never a memory.
    { selector: 'node[role = "system"]', style: { shape: "hexagon", "background-color": COLORS.system } },
    // Tool steps of an OpenAI-compatible client: the model's call of a tool, the client's result for it.
    { selector: 'node[tool_step = "call"]', style: { shape: "tag", "background-color": COLORS.toolCall } },
    { selector: 'node[tool_step = "result"]', style: { shape: "barrel", "background-color": COLORS.toolResult } },
    // An agent's note (MCP `remember`): memory that derives from what the agent said it used.
    { selector: 'node[role = "note"]', style: { shape: "round-tag", "background-color": COLORS.note } },
    // A fact about the user (chat/facts/): derived from the user's own words, with a fact edge from each source.
    { selector: 'node[role = "fact"]', style: { shape: "star", "background-color": COLORS.fact } },
    // Imported: provenance unknown (every earlier message of its conversation is a source).
    { selector: 'node[imported = "yes"]', style: { "border-width": 3, "border-style": "double", "border-color": COLORS.imported } },
    {
      selector: 'node[status = "deleted"], node[status = "purged"]',
      style: {
        "background-color": COLORS.removed,
        "border-width": 2,
        "border-style": "dashed",
        "border-color": "#64748b",
        color: "#64748b",
      },
    },
    { selector: 'node[status = "purged"]', style: { "border-style": "dotted", "background-opacity": 0.5 } },
    { selector: 'node[status = "expiring"]', style: { "border-width": 3, "border-style": "dashed", "border-color": "#d97706" } },
    {
      selector: "edge",
      style: {
        // graph/elements.js maps the score to a width once: no mapData per edge and style pass.
        width: "data(width)",
        "line-color": EDGE_LOOKS.plain.color,
        opacity: EDGE_LOOKS.plain.opacity,
        "curve-style": big ? "haystack" : "bezier",
        ...(big ? {} : { "target-arrow-shape": "triangle", "arrow-scale": 0.7 }),
        ...arrow(COLORS.edge),
      },
    },
    // An agent's note derives from this memory because the agent said so (MCP `remember`), not by retrieval.
    { selector: 'edge[signal = "agent"]', style: { width: EDGE_LOOKS.agent.width, "line-style": "dashed", "line-color": EDGE_LOOKS.agent.color, ...arrow(EDGE_LOOKS.agent.color) } },
    { selector: "edge[rank = 0]", style: { "line-color": EDGE_LOOKS.first.color, ...arrow(EDGE_LOOKS.first.color), opacity: EDGE_LOOKS.first.opacity } },
    // call -> result -> the reply that used it.
    { selector: 'edge[signal = "tool"]', style: { "line-color": EDGE_LOOKS.tool.color, ...arrow(EDGE_LOOKS.tool.color), "line-style": "dashed", opacity: EDGE_LOOKS.tool.opacity } },
    // message -> the fact drawn from it.
    { selector: 'edge[signal = "fact"]', style: { "line-color": EDGE_LOOKS.fact.color, ...arrow(EDGE_LOOKS.fact.color), "line-style": "dashed", opacity: EDGE_LOOKS.fact.opacity } },
    { selector: ".faded", style: { opacity: 0.12 } },
    { selector: "edge.faded", style: { opacity: EDGE_LOOKS.faded.opacity } },
    { selector: "node.dep", style: { "background-color": COLORS.danger, "border-width": 3, "border-color": "#fecaca", "border-style": "solid" } },
    { selector: "node.dep-root", style: { "background-color": COLORS.dangerDark, "border-width": 4, "border-color": COLORS.danger, "border-style": "solid" } },
    { selector: "edge.dep", style: { "line-color": EDGE_LOOKS.dep.color, ...arrow(EDGE_LOOKS.dep.color), opacity: EDGE_LOOKS.dep.opacity } },
    { selector: "node.match", style: { "border-width": 3, "border-color": COLORS.focus, "border-style": "solid" } },
    {
      selector: "node:selected",
      style: { "border-width": 4, "border-color": COLORS.focus, "border-style": "double", "overlay-opacity": 0, "z-index": 10 },
    },
    { selector: ".outside", style: { display: "none" } },
    { selector: "node.leaving", style: { opacity: 0, "transition-property": "opacity", "transition-duration": "250ms" } },
  ];
}

// The focused neighbourhood's dagre layout, on the page (a few dozen nodes);
// the whole graph's is computed in graph/layout-worker.js with the same
// options. `longest-path` ranks without the slower network-simplex pass and
// still keeps every edge pointing right.
export function dagreLayout(eles, { fit = true } = {}) {
  return eles.layout({
    name: "dagre",
    rankDir: "LR",
    ranker: eles.nodes().length > 150 ? "longest-path" : "network-simplex",
    nodeSep: 16,
    rankSep: 50,
    edgeSep: 6,
    nodeDimensionsIncludeLabels: true,
    fit,
    padding: 40,
    animate: false,
    sort: (a, b) => a.data("seq") - b.data("seq"),
  });
}

export { cytoscape };
