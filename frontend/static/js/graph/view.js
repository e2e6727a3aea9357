// Drawing the graph and moving around it: Cytoscape instance (at the
// positions the layout worker computed, graph/layout.js), notices, zoom,
// centring, and the "focus neighbourhood" view. Each function takes the
// GraphExplorer `x` (graph.js) whose state it reads and writes.
import { plural } from "../dom.js";
import { BIG_GRAPH, LABEL_ZOOM, cytoscape, dagreLayout, stylesheet } from "../graph-style.js";
import { EdgeLayer } from "./edge-layer.js";
import { toElements } from "./elements.js";
import { layoutPositions } from "./layout.js";

const PAD = 40;
const MIN_ZOOM = 0.05;
const MAX_ZOOM = 3;
const NODE = 30; // graph-style.js
// A few messages are shown at this zoom at most rather than blown up to fill the canvas.
const READING_ZOOM = 1.2;
// The legend's distance from the canvas's bottom edge (app.css).
const LEGEND_GAP = 12;

// Draws `graph` (an /api/graph/ answer) once the worker has laid it out; the
// graph drawn before stays on screen meanwhile. False when a newer load
// (x.generation) took over while it was laid out: nothing is drawn.
export async function render(x, graph, { keepView, generation }) {
  const elements = toElements(graph);
  const { nodes, edges } = elements;
  const big = nodes.length > BIG_GRAPH;
  const layoutStart = performance.now();
  const positions = nodes.length ? await layoutPositions(elements, { big }) : new Map();
  if (generation !== x.generation) return false;
  const drawStart = performance.now();
  for (const node of nodes) node.position = positions.get(node.data.id);
  const view = keepView && x.cy ? { zoom: x.cy.zoom(), pan: x.cy.pan() } : null;
  x.edgeLayer?.destroy();
  x.cy?.destroy();
  x.focused = false;
  x.focusEdges = null;
  x.dom.showAllButton.hidden = true;
  x.cy = cytoscape({
    container: x.dom.canvas,
    // A big graph's edges are drawn by the edge layer below, not by Cytoscape.
    elements: big ? nodes : [...nodes, ...edges],
    style: stylesheet({ big }),
    layout: { name: "preset", fit: false },
    // A big graph is fitted from its positions: Cytoscape's boxes would measure every element first.
    ...(big && !view ? viewportFor(x, positionsBox(nodes)) : {}),
    minZoom: MIN_ZOOM,
    maxZoom: MAX_ZOOM,
    boxSelectionEnabled: false,
    autoungrabify: big,
    textureOnViewport: big,
    pixelRatio: big ? 1 : "auto",
  });
  if (view) x.cy.viewport(view);
  else if (!big) x.cy.viewport(viewportFor(x, x.cy.elements().boundingBox()));
  x.edgeLayer = big ? new EdgeLayer(x.dom.canvas, x.cy, edges) : null;
  if (big) labelWhenZoomedIn(x, x.cy);
  x.timings = {
    layout: Math.round(drawStart - layoutStart),
    draw: Math.round(performance.now() - drawStart),
    nodes: nodes.length,
    edges: edges.length,
    big,
  };
  x.cy.on("tap", "node", (event) => x.select(event.target.data("mid")));
  x.cy.on("tap", (event) => {
    if (event.target === x.cy) x.closePanel();
  });
  showStats(x);
  if (!nodes.length) {
    showNotice(
      x,
      x.filters.thread ? "No messages in this thread." : "No memories yet. Chat a little, and the graph of what each reply used appears here.",
    );
  } else {
    x.dom.notice.hidden = true;
  }
  return true;
}

// The box of the nodes (positioned, NODE wide) from their positions alone.
function positionsBox(nodes) {
  let [x1, y1, x2, y2] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const { position } of nodes) {
    x1 = Math.min(x1, position.x - NODE / 2);
    y1 = Math.min(y1, position.y - NODE / 2);
    x2 = Math.max(x2, position.x + NODE / 2);
    y2 = Math.max(y2, position.y + NODE / 2);
  }
  return { x1, y1, w: x2 - x1, h: y2 - y1 };
}

// The zoom and pan that show a box (model coordinates) in the part of the
// canvas the panel and the legend leave free, at most at reading size (a few
// messages are not blown up).
function viewportFor(x, box) {
  const free = freeArea(x);
  const width = Math.max(free.width - 2 * PAD, 80);
  const height = Math.max(free.height - 2 * PAD, 80);
  const zoom = Math.max(MIN_ZOOM, Math.min(READING_ZOOM, width / Math.max(box.w, 1), height / Math.max(box.h, 1)));
  return {
    zoom,
    pan: { x: PAD + (width - box.w * zoom) / 2 - box.x1 * zoom, y: PAD + (height - box.h * zoom) / 2 - box.y1 * zoom },
  };
}

// A big graph labels the nodes in view once zoomed in enough to read them,
// after the viewport settles: thousands of labels are never measured at once.
function labelWhenZoomedIn(x, cy) {
  let timer = 0;
  const update = () => {
    if (x.cy !== cy) return;
    const { x1, x2, y1, y2 } = cy.extent();
    const wanted =
      cy.zoom() < LABEL_ZOOM
        ? cy.collection()
        : cy.nodes().filter((node) => {
            const { x: px, y: py } = node.position();
            return px >= x1 && px <= x2 && py >= y1 && py <= y2;
          });
    const labelled = cy.nodes(".labelled");
    cy.batch(() => {
      labelled.difference(wanted).removeClass("labelled");
      wanted.difference(labelled).addClass("labelled");
    });
  };
  cy.on("viewport", () => {
    clearTimeout(timer);
    timer = setTimeout(update, 150);
  });
  update();
}

export function showStats(x) {
  const links = x.edgeLayer ? x.edgeLayer.count : x.cy.edges().length;
  x.dom.setStats(`${plural(x.cy.nodes().length, "message")} · ${plural(links, "link")}`);
}

export function showNotice(x, text) {
  x.dom.notice.hidden = false;
  x.dom.notice.textContent = text;
}

export function fit(x) {
  if (x.cy) x.cy.animate(viewportFor(x, x.cy.elements(":visible").boundingBox()), { duration: 200 });
}

export function zoomBy(x, factor) {
  if (!x.cy) return;
  const level = x.cy.zoom() * factor;
  const canvas = x.dom.canvas;
  x.cy.zoom({ level, renderedPosition: { x: canvas.clientWidth / 2, y: canvas.clientHeight / 2 } });
}

export function center(x, id) {
  const node = x.node(id);
  if (!node?.length) return;
  x.cy.animate(
    { center: { eles: node }, zoom: Math.max(x.cy.zoom(), 1.1) },
    { duration: 250, complete: () => x.dom.panel.hidden || keepClearOfPanel(x, node) },
  );
}

// Only the node, its neighbours and theirs: readable in a big graph.
export function focusOn(x, id) {
  const node = x.node(id);
  if (!node?.length) return;
  // The whole graph's positions, to go back to (not a focused view's, when focusing from one).
  if (!x.focused) x.savedPositions = x.cy.nodes().map((item) => [item.id(), { ...item.position() }]);
  if (x.edgeLayer) {
    // A big graph's edges are the layer's: the neighbourhood's become elements while it is in focus.
    x.edgeLayer.hide(true);
    x.focusEdges?.remove();
    x.focusEdges = x.cy.add(x.edgeLayer.neighbourhood(id));
  }
  const near = node.closedNeighborhood().closedNeighborhood();
  x.cy.elements().addClass("outside");
  near.removeClass("outside");
  dagreLayout(near, { fit: false }).run();
  x.cy.viewport(viewportFor(x, near.boundingBox()));
  x.focused = true;
  x.dom.showAllButton.hidden = false;
  node.select();
}

export function showAll(x) {
  if (!x.focused) return;
  x.cy.batch(() => {
    for (const [id, position] of x.savedPositions) x.cy.getElementById(id).position(position);
    x.cy.elements().removeClass("outside");
  });
  if (x.edgeLayer) {
    x.focusEdges.remove();
    x.focusEdges = null;
    x.edgeLayer.hide(false);
  }
  x.focused = false;
  x.dom.showAllButton.hidden = true;
  fit(x);
}

// The part of the canvas the panel and the legend leave free: beside the panel
// (a side panel) or above it (at the bottom, on a phone), and above the legend.
function freeArea(x) {
  const { canvas, panel, legend } = x.dom;
  const [width, height] = [canvas.clientWidth, canvas.clientHeight - (legend.offsetHeight ? legend.offsetHeight + LEGEND_GAP : 0)];
  if (panel.hidden) return { width, height };
  if (panel.offsetWidth > width * 0.8) return { width, height: Math.max(canvas.clientHeight - panel.offsetHeight - 16, 0) };
  return { width: width - panel.offsetWidth - 24, height };
}

// Zooms and pans so `eles` fill the part of the canvas the panel and the legend leave free.
export function fitBeside(x, eles) {
  x.cy.animate(viewportFor(x, eles.boundingBox()), { duration: 250 });
}

// Pans so the node is not hidden under the panel.
export function keepClearOfPanel(x, node) {
  const { width, height } = freeArea(x);
  const { x: left, y: top } = node.renderedPosition();
  if (width > 120 && left > width - 40) x.cy.panBy({ x: width / 2 - left, y: 0 });
  if (height > 120 && top > height - 40) x.cy.panBy({ x: 0, y: height / 2 - top });
}
