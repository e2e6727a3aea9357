// The memory graph explorer: a reusable component over Cytoscape.js.
//
//   const explorer = new GraphExplorer(host, { source, readOnly, links });
//   await explorer.load();
//
// `source` supplies the data: graph({thread, includeDeleted}) -> Cytoscape
// elements as /api/graph/ returns them, message(id), dependents(id), and
// optionally threads() and find(filters, words) -> the ids of the window's
// messages that say those words; unless `readOnly`, also previewDeletion(body),
// confirmDeletion(id) and undoDeletion(id). `links.chat(message)` and
// `links.deletions` make the panel's links. The chat app passes the /api/
// client; a staff page can pass its own per-user source with readOnly: true.
// A page that mounts it links css/cytoscape.css with the id Cytoscape looks
// for (see that file) and css/app.css.
//
// This class holds the explorer's state and its public methods; the work is
// done by one module per concern under graph/, each a set of functions over
// the explorer:
//   toolbar.js   the DOM: toolbar, canvas, legend, the empty side panel
//   load.js      fetching the graph and threads, the ready signal
//   elements.js  API elements -> Cytoscape elements
//   layout.js    the layout, computed in layout-worker.js (timeline.js for big graphs)
//   view.js      rendering, zoom, centring, focus neighbourhood
//   edge-layer.js  a big graph's edges, drawn under Cytoscape's canvas
//   search.js    Find by seq or words
//   panel.js     the selected message's side panel
//   cascade.js   preview delete (Dep(m)), confirm, undo
import { buildExplorer } from "./graph/toolbar.js";
import { highlighted } from "./graph/cascade.js";
import { load } from "./graph/load.js";
import { closePanel, select } from "./graph/panel.js";
import { nextMatch, search } from "./graph/search.js";
import { fit, showAll, zoomBy } from "./graph/view.js";

let explorers = 0;

export class GraphExplorer {
  constructor(host, { source, readOnly = false, links = {} }) {
    explorers += 1;
    this.uid = `gx${explorers}`;
    this.host = host;
    this.source = source;
    this.readOnly = readOnly;
    this.links = links;
    this.filters = { thread: "", includeDeleted: false };
    this.cy = null; // the Cytoscape instance, replaced on every load
    this.edgeLayer = null; // a big graph's edges (graph/edge-layer.js), replaced with it
    this.focusEdges = null; // a big graph's focused neighbourhood's edges, as Cytoscape elements
    this.selected = null; // id of the message in the side panel
    this.preview = null; // the dependents answer being previewed
    this.matches = [];
    this.matchIndex = -1;
    this.matchQuery = ""; // the text `matches` were found for
    this.focused = false; // showing one neighbourhood only
    this.timings = {};
    this.generation = 0; // counts loads: only the newest one draws
    this.dom = buildExplorer(host, this.uid, {
      thread: (value) => {
        this.filters.thread = value;
        this.load();
      },
      deleted: (checked) => {
        this.filters.includeDeleted = checked;
        this.load();
      },
      search: (text) => search(this, text),
      find: () => nextMatch(this),
      fit: () => fit(this),
      zoom: (factor) => zoomBy(this, factor),
      showAll: () => showAll(this),
    });
    host.explorer = this;
  }

  load(options) {
    return load(this, options);
  }

  // Reload the data, keeping the viewport.
  refresh() {
    return this.load({ keepView: true });
  }

  node(id) {
    return this.cy?.getElementById(String(id));
  }

  select(id, options) {
    return select(this, id, options);
  }

  closePanel(options) {
    closePanel(this, options);
  }

  // Ids currently highlighted as Dep(m) (the root included), ascending.
  highlighted() {
    return highlighted(this);
  }
}
