// The memory graph explorer: a reusable component over Cytoscape.js.
//
//   const explorer = new GraphExplorer(host, { source, readOnly, links });
//   await explorer.load();
//
// `source` supplies the data: graph({thread, includeDeleted}) -> Cytoscape
// elements as /api/graph/ returns them, message(id), dependents(id), and
// optionally threads(); unless `readOnly`, also previewDeletion(body),
// confirmDeletion(id) and undoDeletion(id). `links.chat(message)` and
// `links.deletions` make the panel's links. The chat app passes the /api/
// client; a staff page can pass its own per-user source with readOnly: true.
// A page that mounts it links css/cytoscape.css with the id Cytoscape looks
// for (see that file) and css/app.css.
import { el, formatWhen, plural, replaceChildren, snippet, toast } from "./dom.js";
import { BIG_GRAPH, cytoscape, dagreLayout, stylesheet, timelinePositions } from "./graph-style.js";
import { confirmDialog, modePicker, pathLabel, trapFocus } from "./ui.js";

let explorers = 0;

function toElements(graph) {
  const nodes = graph.nodes.map(({ data }) => {
    const text = data.label.includes(": ") ? data.label.slice(data.label.indexOf(": ") + 2) : "";
    return {
      group: "nodes",
      data: {
        ...data,
        id: String(data.id),
        mid: data.id,
        short: `#${data.seq}`,
        caption: data.status === "purged" ? `#${data.seq} purged` : `#${data.seq} ${snippet(text, 26)}`,
      },
    };
  });
  const edges = graph.edges.map(({ data }) => ({
    group: "edges",
    data: { ...data, source: String(data.source), target: String(data.target) },
  }));
  return { nodes, edges };
}

export class GraphExplorer {
  constructor(host, { source, readOnly = false, links = {} }) {
    explorers += 1;
    this.uid = `gx${explorers}`;
    this.host = host;
    this.source = source;
    this.readOnly = readOnly;
    this.links = links;
    this.filters = { thread: "", includeDeleted: false };
    this.selected = null;
    this.preview = null;
    this.matches = [];
    this.matchIndex = -1;
    this.focused = false;
    this.timings = {};
    this.build();
    host.explorer = this;
  }

  /* DOM ------------------------------------------------------------------ */

  build() {
    const id = (name) => `${this.uid}-${name}`;
    this.threadSelect = el("select", { id: id("thread") }, el("option", { value: "" }, "All threads"));
    this.deletedToggle = el("input", { type: "checkbox", id: id("deleted") });
    this.searchInput = el("input", { type: "search", id: id("search"), placeholder: "#12 or words", autocomplete: "off" });
    this.searchCount = el("span", { class: "search-count", "aria-live": "polite" });
    this.showAllButton = el("button", { type: "button", class: "btn btn-small btn-primary", hidden: true, onclick: () => this.showAll() }, "Show whole graph");
    this.stats = el("span", { class: "graph-stats" });
    const toolbar = el(
      "div",
      { class: "explorer-toolbar", role: "group", "aria-label": "Graph controls" },
      el("div", { class: "tool" }, el("label", { for: id("thread") }, "Thread"), this.threadSelect),
      el("label", { class: "switch", for: id("deleted") }, this.deletedToggle, el("span", {}, "Show deleted")),
      el(
        "form",
        { class: "tool search", role: "search", onsubmit: (event) => { event.preventDefault(); this.nextMatch(); } },
        el("label", { for: id("search") }, "Find"),
        this.searchInput,
        this.searchCount,
      ),
      el(
        "div",
        { class: "tool zoom", role: "group", "aria-label": "Zoom" },
        el("button", { type: "button", class: "btn btn-small btn-quiet", onclick: () => this.fit() }, "Fit"),
        el("button", { type: "button", class: "btn btn-small btn-quiet", "aria-label": "Zoom in", onclick: () => this.zoomBy(1.4) }, "+"),
        el("button", { type: "button", class: "btn btn-small btn-quiet", "aria-label": "Zoom out", onclick: () => this.zoomBy(1 / 1.4) }, "−"),
      ),
      this.showAllButton,
      this.stats,
    );
    this.canvas = el("div", { class: "explorer-canvas", tabindex: "0", role: "application", "aria-label": "Provenance graph. Use Find to reach a message by keyboard." });
    this.notice = el("div", { class: "explorer-notice", hidden: true });
    this.panel = el("aside", { class: "explorer-panel", id: id("panel"), hidden: true, role: "dialog", "aria-modal": "false", "aria-labelledby": id("panel-title") });
    const legend = el(
      "ul",
      { class: "legend", "aria-label": "Legend" },
      el("li", {}, el("span", { class: "key key-user" }), "you"),
      el("li", {}, el("span", { class: "key key-assistant" }), "DeLLM"),
      el("li", {}, el("span", { class: "key key-expiring" }), "expiring"),
      el("li", {}, el("span", { class: "key key-removed" }), "deleted / purged"),
      el("li", {}, el("span", { class: "key key-edge" }), "used by (thicker = closer match)"),
    );
    const stage = el("div", { class: "explorer-stage" }, this.canvas, this.notice, legend, this.panel);
    replaceChildren(this.host, el("div", { class: "explorer" }, toolbar, stage));

    this.threadSelect.addEventListener("change", () => {
      this.filters.thread = this.threadSelect.value;
      this.load();
    });
    this.deletedToggle.addEventListener("change", () => {
      this.filters.includeDeleted = this.deletedToggle.checked;
      this.load();
    });
    let searchTimer;
    this.searchInput.addEventListener("input", () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(() => this.search(this.searchInput.value), 150);
    });
  }

  /* Data ----------------------------------------------------------------- */

  async load({ keepView = false } = {}) {
    const started = performance.now();
    this.host.dataset.ready = "false";
    this.closePanel();
    if (this.source.threads && this.threadSelect.options.length === 1) {
      this.source
        .threads()
        .then((threads) => {
          for (const thread of threads) {
            this.threadSelect.append(el("option", { value: thread.id }, thread.title || `Untitled · ${formatWhen(thread.created_at)}`));
          }
        })
        .catch(() => {});
    }
    let graph;
    try {
      graph = await this.source.graph(this.filters);
    } catch (error) {
      this.showNotice(`The graph could not be loaded: ${error.message}`);
      return;
    }
    const fetched = performance.now();
    this.render(graph, { keepView });
    this.timings = { fetch: Math.round(fetched - started), ...this.timings };
    return this.ready(started);
  }

  render(graph, { keepView }) {
    const { nodes, edges } = toElements(graph);
    const big = nodes.length > BIG_GRAPH;
    const view = keepView && this.cy ? { zoom: this.cy.zoom(), pan: this.cy.pan() } : null;
    this.cy?.destroy();
    this.focused = false;
    this.showAllButton.hidden = true;
    const layoutStart = performance.now();
    if (big) {
      const positions = timelinePositions(graph.nodes.map((node) => node.data), graph.edges.map((edge) => edge.data));
      for (const node of nodes) node.position = positions.get(node.data.mid);
    }
    this.cy = cytoscape({
      container: this.canvas,
      elements: [...nodes, ...edges],
      style: stylesheet({ big }),
      layout: big ? { name: "preset", fit: !view, padding: 40 } : { name: "null" },
      minZoom: 0.05,
      maxZoom: 3,
      boxSelectionEnabled: false,
      autoungrabify: big,
      hideEdgesOnViewport: big,
      textureOnViewport: big,
      pixelRatio: big ? 1 : "auto",
    });
    if (!big && nodes.length) dagreLayout(this.cy.elements(), { fit: !view }).run();
    if (view) this.cy.viewport(view);
    else if (this.cy.zoom() > 1.2) {
      // A few messages: keep them at reading size rather than blown up.
      this.cy.zoom(1.2);
      this.cy.center();
    }
    this.timings = { layout: Math.round(performance.now() - layoutStart), nodes: nodes.length, edges: edges.length, big };
    this.cy.on("tap", "node", (event) => this.select(event.target.data("mid")));
    this.cy.on("tap", (event) => {
      if (event.target === this.cy) this.closePanel();
    });
    this.stats.textContent = `${plural(nodes.length, "message")} · ${plural(edges.length, "link")}`;
    if (!nodes.length) {
      this.showNotice(
        this.filters.thread ? "No messages in this thread." : "No memories yet. Chat a little, and the graph of what each reply used appears here.",
      );
    } else {
      this.notice.hidden = true;
    }
    if (this.searchInput.value) this.search(this.searchInput.value);
  }

  // Resolves once the first frame with the new graph is drawn.
  ready(started) {
    return new Promise((resolve) => {
      requestAnimationFrame(() =>
        requestAnimationFrame(() => {
          this.timings.interactive = Math.round(performance.now() - started);
          this.host.dataset.ready = "true";
          this.host.dispatchEvent(new CustomEvent("explorer:ready", { detail: this.timings }));
          resolve(this.timings);
        }),
      );
    });
  }

  showNotice(text) {
    this.notice.hidden = false;
    this.notice.textContent = text;
  }

  node(id) {
    return this.cy?.getElementById(String(id));
  }

  /* Viewport ------------------------------------------------------------- */

  fit() {
    this.cy?.animate({ fit: { eles: this.cy.elements(":visible"), padding: 40 } }, { duration: 200 });
  }

  zoomBy(factor) {
    if (!this.cy) return;
    const level = this.cy.zoom() * factor;
    this.cy.zoom({ level, renderedPosition: { x: this.canvas.clientWidth / 2, y: this.canvas.clientHeight / 2 } });
  }

  center(id) {
    const node = this.node(id);
    if (!node?.length) return;
    this.cy.animate(
      { center: { eles: node }, zoom: Math.max(this.cy.zoom(), 1.1) },
      { duration: 250, complete: () => this.panel.hidden || this.keepClearOfPanel(node) },
    );
  }

  // Only the node, its neighbours and theirs: readable in a big graph.
  focusOn(id) {
    const node = this.node(id);
    if (!node?.length) return;
    const near = node.closedNeighborhood().closedNeighborhood();
    this.cy.elements().addClass("outside");
    near.removeClass("outside");
    this.savedPositions = this.cy.nodes().map((item) => [item.id(), { ...item.position() }]);
    dagreLayout(near, { fit: true }).run();
    this.focused = true;
    this.showAllButton.hidden = false;
    node.select();
  }

  showAll() {
    if (!this.focused) return;
    this.cy.batch(() => {
      for (const [id, position] of this.savedPositions) this.cy.getElementById(id).position(position);
      this.cy.elements().removeClass("outside");
    });
    this.focused = false;
    this.showAllButton.hidden = true;
    this.fit();
  }

  /* Search --------------------------------------------------------------- */

  search(text) {
    if (!this.cy) return;
    const query = text.trim().toLowerCase();
    this.cy.nodes().removeClass("match");
    this.matches = [];
    this.matchIndex = -1;
    if (query) {
      const seq = /^#?(\d+)$/.exec(query);
      const found = this.cy.nodes().filter((node) =>
        seq ? node.data("seq") === Number(seq[1]) : node.data("label").toLowerCase().includes(query),
      );
      found.addClass("match");
      this.matches = found.map((node) => node.data("mid")).sort((a, b) => this.node(a).data("seq") - this.node(b).data("seq"));
    }
    this.searchCount.textContent = query ? (this.matches.length ? plural(this.matches.length, "match", "matches") : "no match") : "";
  }

  nextMatch() {
    if (!this.matches.length) this.search(this.searchInput.value);
    if (!this.matches.length) return;
    this.matchIndex = (this.matchIndex + 1) % this.matches.length;
    this.select(this.matches[this.matchIndex], { center: true });
  }

  /* Selection and the side panel ----------------------------------------- */

  async select(id, { center = false } = {}) {
    const node = this.node(id);
    if (!node?.length) {
      toast("That message is not in the graph (deleted, or filtered out).", { kind: "info" });
      return;
    }
    if (this.focused && node.hasClass("outside")) this.showAll();
    this.clearPreview();
    this.cy.nodes().unselect();
    node.select();
    this.selected = id;
    this.openPanel(el("p", { class: "muted" }, "Loading…"), node.data());
    if (center) this.center(id);
    else this.keepClearOfPanel(node);
    let message;
    try {
      message = await this.source.message(id);
    } catch (error) {
      this.fillPanel(el("p", { class: "error-text" }, error.message));
      return;
    }
    if (this.selected === id) this.fillPanel(this.details(message));
  }

  openPanel(content, data) {
    const titleId = `${this.uid}-panel-title`;
    const close = el("button", { type: "button", class: "panel-close", "aria-label": "Close panel", onclick: () => this.closePanel({ refocus: true }) }, "×");
    replaceChildren(
      this.panel,
      el(
        "header",
        { class: "panel-head" },
        el("h2", { id: titleId }, `#${data.seq}`, " ", el("span", { class: `role role-${data.role}` }, data.role === "user" ? "you" : "DeLLM")),
        el("span", { class: `badge badge-status-${data.status}` }, data.status),
        close,
      ),
      el("div", { class: "panel-body" }, content),
    );
    this.panel.hidden = false;
    this.host.classList.add("panel-open");
    this.releaseFocus?.();
    this.releaseFocus = trapFocus(this.panel, { onEscape: () => this.closePanel({ refocus: true }) });
    close.focus();
  }

  // Zooms and pans so `eles` fill the part of the canvas the panel leaves free.
  fitBeside(eles) {
    const pad = 40;
    const free = this.panel.hidden ? this.canvas.clientWidth : this.canvas.clientWidth - this.panel.offsetWidth - 24;
    const box = eles.boundingBox();
    const width = Math.max(free - 2 * pad, 80);
    const height = Math.max(this.canvas.clientHeight - 2 * pad, 80);
    const zoom = Math.max(this.cy.minZoom(), Math.min(1.2, width / Math.max(box.w, 1), height / Math.max(box.h, 1)));
    this.cy.animate(
      {
        zoom,
        pan: { x: pad + (width - box.w * zoom) / 2 - box.x1 * zoom, y: pad + (height - box.h * zoom) / 2 - box.y1 * zoom },
      },
      { duration: 250 },
    );
  }

  // Pans so the node is not hidden under the side panel.
  keepClearOfPanel(node) {
    const visible = this.canvas.clientWidth - this.panel.offsetWidth - 24;
    const x = node.renderedPosition().x;
    if (visible > 120 && x > visible - 40) this.cy.panBy({ x: visible / 2 - x, y: 0 });
  }

  fillPanel(content) {
    const body = this.panel.querySelector(".panel-body");
    if (body) replaceChildren(body, content);
  }

  closePanel({ refocus = false } = {}) {
    if (this.panel.hidden) return;
    this.clearPreview();
    this.panel.hidden = true;
    this.host.classList.remove("panel-open");
    this.cy?.nodes().unselect();
    this.selected = null;
    const release = this.releaseFocus;
    this.releaseFocus = null;
    release?.();
    if (refocus) this.canvas.focus();
  }

  neighbourList(ids, emptyText) {
    const present = ids.filter((id) => this.node(id)?.length);
    if (!present.length) return el("p", { class: "muted small" }, emptyText);
    return el(
      "ul",
      { class: "neighbours" },
      present.map((id) => {
        const data = this.node(id).data();
        return el(
          "li",
          {},
          el(
            "button",
            { type: "button", class: "neighbour", dataset: { id }, onclick: () => this.select(id, { center: true }) },
            el("span", { class: "seq" }, `#${data.seq}`),
            el("span", { class: `role role-${data.role}` }, data.role === "user" ? "you" : "DeLLM"),
            el("span", { class: "neighbour-text" }, data.caption.replace(/^#\d+ /, "")),
          ),
        );
      }),
    );
  }

  details(message) {
    const live = message.status === "active" || message.status === "expiring";
    const content =
      message.status === "purged"
        ? el("p", { class: "muted" }, "Purged: the text was destroyed. Only this tombstone keeps the graph's shape.")
        : el("div", { class: "panel-content" }, message.content);
    const actions = el("div", { class: "panel-actions" });
    if (!this.readOnly && live) {
      actions.append(el("button", { type: "button", class: "btn btn-danger-quiet", dataset: { action: "preview-delete" }, onclick: () => this.previewDelete(message) }, "Preview delete"));
    }
    actions.append(el("button", { type: "button", class: "btn btn-quiet", onclick: () => this.focusOn(message.id) }, "Focus neighbourhood"));
    if (this.links.chat && live) {
      actions.append(el("a", { class: "btn btn-quiet", href: this.links.chat(message) }, "Open in chat"));
    }
    this.previewBox = el("div", { class: "preview-box", "aria-live": "polite" });
    return [
      el("p", { class: "panel-when muted small" }, formatWhen(message.created_at), message.thread ? ` · thread ${message.thread}` : ""),
      content,
      actions,
      this.previewBox,
      el("h3", {}, "Came from"),
      this.neighbourList(message.context, message.role === "user" ? "Nothing: you wrote it." : "No earlier messages in view."),
      el("h3", {}, "Derived"),
      this.neighbourList(message.derived, "Nothing was built from it yet."),
    ];
  }

  /* Preview delete and confirm ------------------------------------------- */

  highlight(rootId, ids) {
    const members = this.cy.collection([this.node(rootId), ...ids.map((id) => this.node(id))].filter((node) => node?.length));
    this.cy.batch(() => {
      this.cy.elements().addClass("faded");
      members.removeClass("faded");
      members.edgesWith(members).removeClass("faded").addClass("dep");
      members.addClass("dep");
      this.node(rootId).removeClass("dep").addClass("dep-root");
    });
    this.fitBeside(members);
  }

  // Ids currently highlighted as Dep(m) (the root included), ascending.
  highlighted() {
    return this.cy ? this.cy.nodes(".dep, .dep-root").map((node) => node.data("mid")).sort((a, b) => a - b) : [];
  }

  clearPreview() {
    this.preview = null;
    this.cy?.elements().removeClass("faded dep dep-root");
  }

  async previewDelete(message) {
    let answer;
    try {
      answer = await this.source.dependents(message.id);
    } catch (error) {
      toast(error.message, { kind: "error" });
      return;
    }
    if (this.selected !== message.id) return;
    this.preview = answer;
    this.highlight(message.id, answer.dependents.map((item) => item.id));
    const total = answer.count + 1;
    const seqOf = (id) => this.node(id)?.data("seq") ?? (id === message.id ? message.seq : answer.dependents.find((item) => item.id === id)?.seq);
    const picker = modePicker({ name: `${this.uid}-mode-${message.id}`, initial: "soft" });
    const error = el("p", { class: "error-text", role: "alert" });
    const dependents = answer.dependents.length
      ? el(
          "ol",
          { class: "dep-list" },
          answer.dependents.map((item) =>
            el(
              "li",
              { dataset: { id: item.id } },
              el(
                "button",
                { type: "button", class: "neighbour", onclick: () => this.center(item.id) },
                el("span", { class: "seq" }, `#${item.seq}`),
                el("span", { class: `role role-${item.role}` }, item.role === "user" ? "you" : "DeLLM"),
                el("span", { class: "neighbour-text" }, this.node(item.id)?.data("caption").replace(/^#\d+ /, "") || ""),
              ),
              el("span", { class: "why" }, "via ", pathLabel(item.path, seqOf)),
            ),
          ),
        )
      : el("p", { class: "muted small" }, "Nothing was built from it: only this message goes.");
    const form = el(
      "form",
      { class: "preview-form" },
      picker.element,
      error,
      el(
        "div",
        { class: "panel-actions" },
        el("button", { type: "button", class: "btn btn-quiet", onclick: () => { this.clearPreview(); replaceChildren(this.previewBox); } }, "Clear preview"),
        el("button", { type: "submit", class: "btn btn-danger", dataset: { action: "delete" } }, `Delete ${plural(total, "message")}…`),
      ),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const choice = picker.choiceOrError(error);
      if (!choice) return;
      const ok = await confirmDialog({
        title: `Delete ${plural(total, "message")}?`,
        body: [
          el("p", {}, `#${message.seq}`, answer.count ? ` and ${plural(answer.count, "message")} derived from it` : "", ` will be removed by ${picker.describe()}.`),
          choice.mode === "purge" ? el("p", { class: "error-text" }, "Purged text cannot be recovered.") : null,
        ],
        confirmLabel: `Delete ${plural(total, "message")}`,
        danger: true,
      });
      if (!ok) return;
      try {
        await this.deleteMessage(message, choice);
      } catch (problem) {
        error.textContent = problem.message;
      }
    });
    replaceChildren(
      this.previewBox,
      el("p", { class: "preview-summary" }, el("strong", { dataset: { count: total } }, `Deleting #${message.seq} removes ${plural(total, "message")}`), answer.count ? ": it and everything built from it." : "."),
      dependents,
      form,
    );
  }

  async deleteMessage(message, choice) {
    const preview = await this.source.previewDeletion({ select: { ids: [message.id] }, ...choice });
    const done = await this.source.confirmDeletion(preview.id);
    this.closePanel();
    if (done.status === "scheduled") {
      toast(`Scheduled: #${message.seq} and what derives from it go at ${new Date(done.expire_at).toLocaleString()}.`, { kind: "success" });
      await this.refresh();
      return done;
    }
    const removed = done.deleted.map((id) => this.node(id)).filter((node) => node?.length);
    if (this.filters.includeDeleted) {
      for (const node of removed) node.data("status", done.mode === "purge" ? "purged" : "deleted");
    } else {
      const gone = this.cy.collection(removed);
      gone.addClass("leaving");
      setTimeout(() => {
        gone.remove();
        this.stats.textContent = `${plural(this.cy.nodes().length, "message")} · ${plural(this.cy.edges().length, "link")}`;
      }, 260);
    }
    const undo =
      done.mode === "soft" && this.source.undoDeletion
        ? { label: "Undo", run: () => this.undo(done.id) }
        : undefined;
    toast(`${plural(done.deleted.length, "message")} deleted.`, { kind: "success", action: undo });
    this.host.dispatchEvent(new CustomEvent("explorer:deleted", { detail: done }));
    return done;
  }

  async undo(deletionId) {
    try {
      await this.source.undoDeletion(deletionId);
      toast("Restored.", { kind: "success" });
      await this.refresh();
    } catch (error) {
      toast(error.message, { kind: "error" });
    }
  }

  // Reload the data, keeping the viewport.
  refresh() {
    return this.load({ keepView: true });
  }
}
