// A big graph's edges, drawn by the explorer itself on one canvas under
// Cytoscape's, not as Cytoscape elements. Past BIG_GRAPH nodes Cytoscape's
// own work per element (its style pass, bounding boxes, layered textures) is
// most of the page's time, and three edges come with every node: 2,000
// nodes drew in about 2 s with their edges as elements, half a second
// without them (lab/HISTORY.md). Here an edge is four numbers in one typed
// array, and the edges of one look (graph-style.js's EDGE_LOOKS) are one
// Path2D in model coordinates, stroked under the viewport's transform.
//
//   const layer = new EdgeLayer(container, cy, edges)   // graph/elements.js edges, nodes positioned in cy
//   layer.highlight(ids) / layer.highlight(null)       // Dep(m): its edges red, the rest faded
//   layer.neighbourhood(id)                             // the focus view's edges, as Cytoscape elements
//   layer.drop(ids) / layer.hide(bool) / layer.destroy()
import { EDGE_LOOKS, edgeLook } from "../graph-style.js";

export class EdgeLayer {
  constructor(container, cy, edges) {
    this.cy = cy;
    this.edges = edges;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "edge-layer";
    this.canvas.setAttribute("aria-hidden", "true");
    // Under Cytoscape's own canvases, which it appends to the container after this one.
    container.prepend(this.canvas);
    this.members = null;
    this.frame = 0;
    // The whole graph's positions, read once: a focused view moves some nodes for a while.
    this.at = new Map();
    cy.nodes().forEach((node) => this.at.set(node.id(), { ...node.position() }));
    this.build();
    this.redraw = () => this.schedule();
    cy.on("viewport resize", this.redraw);
  }

  // Each edge's ends (x1, y1, x2, y2 in `coords`) and look, from the nodes' positions.
  build() {
    const at = this.at;
    this.edges = this.edges.filter((edge) => at.has(edge.data.source) && at.has(edge.data.target));
    this.coords = new Float32Array(this.edges.length * 4);
    this.looks = this.edges.map((edge, index) => {
      const [from, to] = [at.get(edge.data.source), at.get(edge.data.target)];
      this.coords.set([from.x, from.y, to.x, to.y], index * 4);
      return edgeLook(edge.data);
    });
    this.paths = this.pathsOf(() => true);
    this.depPaths = this.members ? this.pathsOf((index) => this.isDep(index)) : null;
    this.schedule();
  }

  // One Path2D per look among the edges `keep(index)` accepts: { key: { look, path } }.
  pathsOf(keep) {
    const paths = {};
    this.looks.forEach((look, index) => {
      if (!keep(index)) return;
      const entry = (paths[look.key] ??= { look, path: new Path2D() });
      const c = this.coords.subarray(index * 4, index * 4 + 4);
      entry.path.moveTo(c[0], c[1]);
      entry.path.lineTo(c[2], c[3]);
    });
    return Object.values(paths);
  }

  get count() {
    return this.edges.length;
  }

  // Highlights the edges among `ids` (Cytoscape node ids) as Dep(m)'s and fades the others; null clears.
  highlight(ids) {
    this.members = ids ? new Set(ids) : null;
    this.depPaths = this.members ? this.pathsOf((index) => this.isDep(index)) : null;
    this.schedule();
  }

  isDep(index) {
    const { source, target } = this.edges[index].data;
    return this.members.has(source) && this.members.has(target);
  }

  // The number of edges drawn as Dep(m)'s.
  highlightedCount() {
    return this.members ? this.edges.filter((_, index) => this.isDep(index)).length : 0;
  }

  // The edges touching the node or its neighbours (Cytoscape's closedNeighborhood twice), as elements to
  // add, with the classes a preview gives edges (faded, or dep among its members).
  neighbourhood(id) {
    const key = String(id);
    const near = new Set([key]);
    for (const edge of this.edges) {
      if (edge.data.source === key) near.add(edge.data.target);
      if (edge.data.target === key) near.add(edge.data.source);
    }
    return this.edges
      .filter((edge) => near.has(edge.data.source) || near.has(edge.data.target))
      .map((edge) => {
        const among = this.members?.has(edge.data.source) && this.members.has(edge.data.target);
        return { group: "edges", data: edge.data, classes: this.members ? (among ? "dep" : "faded") : "" };
      });
  }

  // Forgets removed nodes and their edges (ids as Cytoscape's strings).
  drop(ids) {
    for (const id of ids) this.at.delete(id);
    this.build();
  }

  hide(hidden) {
    this.canvas.hidden = hidden;
    if (!hidden) this.schedule();
  }

  destroy() {
    cancelAnimationFrame(this.frame);
    this.cy.off("viewport resize", this.redraw);
    this.canvas.remove();
  }

  // One draw per frame however many viewport events came in it.
  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    if (this.canvas.hidden || this.cy.destroyed()) return;
    const { clientWidth: width, clientHeight: height } = this.canvas.parentElement;
    if (this.canvas.width !== width || this.canvas.height !== height) {
      this.canvas.width = width;
      this.canvas.height = height;
    }
    const context = this.canvas.getContext("2d");
    context.setTransform(1, 0, 0, 1, 0, 0);
    context.clearRect(0, 0, width, height);
    const zoom = this.cy.zoom();
    const pan = this.cy.pan();
    context.setTransform(zoom, 0, 0, zoom, pan.x, pan.y);
    const faded = Boolean(this.members);
    for (const { look, path } of this.paths) stroke(context, look, path, faded ? EDGE_LOOKS.faded.opacity : look.opacity);
    for (const { look, path } of this.depPaths || []) {
      stroke(context, { ...look, color: EDGE_LOOKS.dep.color }, path, EDGE_LOOKS.dep.opacity);
    }
  }
}

function stroke(context, look, path, opacity) {
  context.globalAlpha = opacity;
  context.strokeStyle = look.color;
  context.lineWidth = look.width;
  context.setLineDash(look.dashed ? [6, 3] : []);
  context.stroke(path);
}
