// The explorer's DOM: toolbar (thread filter, deleted toggle, find, zoom),
// canvas, notice, legend and the (empty) side panel. Knows no graph: it calls
// back `on.thread(value)`, `on.deleted(checked)`, `on.search(text)` (debounced),
// `on.find()`, `on.fit()`, `on.zoom(factor)` and `on.showAll()`.
import { el, replaceChildren } from "../dom.js";
import { roleLabel, threadTitle } from "../model.js";

const SEARCH_DEBOUNCE_MS = 150;

function legend() {
  return el(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    el("li", {}, el("span", { class: "key key-user" }), roleLabel("user")),
    el("li", {}, el("span", { class: "key key-assistant" }), roleLabel("assistant")),
    el("li", { title: "The system prompt of an OpenAI-compatible client: the replies it shaped derive from it" }, el("span", { class: "key key-system" }), roleLabel("system")),
    el("li", { title: "The model called a tool of your OpenAI-compatible client" }, el("span", { class: "key key-tool-call" }), "tool call"),
    el("li", { title: "Your client's tool result: it derives from the call, and the reply that used it from it" }, el("span", { class: "key key-tool-result" }), "tool result"),
    el("li", { title: "Written by an agent over MCP: it derives from the memories the agent said it used" }, el("span", { class: "key key-note" }), roleLabel("note")),
    el("li", { title: "A fact about you, drawn from your own words: it leaves with the messages it was drawn from" }, el("span", { class: "key key-fact" }), roleLabel("fact")),
    el("li", {}, el("span", { class: "key key-expiring" }), "expiring"),
    el("li", { title: "Imported from another tool: every earlier message of its conversation counts as a source" }, el("span", { class: "key key-imported" }), "imported"),
    el("li", {}, el("span", { class: "key key-removed" }), "deleted / purged"),
    el("li", {}, el("span", { class: "key key-edge" }), "used by (thicker = closer match)"),
    el("li", {}, el("span", { class: "key key-edge-tool" }), "tool step"),
    el("li", { title: "An agent said it used this memory to write its note" }, el("span", { class: "key key-edge-agent" }), "agent used"),
    el("li", { title: "A fact was drawn from this message" }, el("span", { class: "key key-edge-fact" }), "fact drawn from"),
  );
}

export function buildExplorer(host, uid, on) {
  const id = (name) => `${uid}-${name}`;
  const threadSelect = el("select", { id: id("thread") }, el("option", { value: "" }, "All threads"));
  const deletedToggle = el("input", { type: "checkbox", id: id("deleted") });
  const searchInput = el("input", { type: "search", id: id("search"), placeholder: "#12 or words", autocomplete: "off" });
  const searchCount = el("span", { class: "search-count", "aria-live": "polite" });
  const showAllButton = el("button", { type: "button", class: "btn btn-small btn-primary", hidden: true, onclick: () => on.showAll() }, "Show whole graph");
  const stats = el("span", { class: "graph-stats" });
  const toolbar = el(
    "div",
    { class: "explorer-toolbar", role: "group", "aria-label": "Graph controls" },
    el("div", { class: "tool" }, el("label", { for: id("thread") }, "Thread"), threadSelect),
    el("label", { class: "switch", for: id("deleted") }, deletedToggle, el("span", {}, "Show deleted")),
    el(
      "form",
      { class: "tool search", role: "search", onsubmit: (event) => { event.preventDefault(); on.find(); } },
      el("label", { for: id("search") }, "Find"),
      searchInput,
      searchCount,
    ),
    el(
      "div",
      { class: "tool zoom", role: "group", "aria-label": "Zoom" },
      el("button", { type: "button", class: "btn btn-small btn-quiet", onclick: () => on.fit() }, "Fit"),
      el("button", { type: "button", class: "btn btn-small btn-quiet", "aria-label": "Zoom in", onclick: () => on.zoom(1.4) }, "+"),
      el("button", { type: "button", class: "btn btn-small btn-quiet", "aria-label": "Zoom out", onclick: () => on.zoom(1 / 1.4) }, "−"),
    ),
    showAllButton,
    stats,
  );
  const canvas = el("div", { class: "explorer-canvas", tabindex: "0", role: "application", "aria-label": "Provenance graph. Use Find to reach a message by keyboard." });
  const notice = el("div", { class: "explorer-notice", hidden: true });
  const panel = el("aside", { class: "explorer-panel", id: id("panel"), hidden: true, role: "dialog", "aria-modal": "false", "aria-labelledby": id("panel-title") });
  const key = legend();
  const stage = el("div", { class: "explorer-stage" }, canvas, notice, key, panel);
  replaceChildren(host, el("div", { class: "explorer" }, toolbar, stage));

  threadSelect.addEventListener("change", () => on.thread(threadSelect.value));
  deletedToggle.addEventListener("change", () => on.deleted(deletedToggle.checked));
  let searchTimer;
  searchInput.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => on.search(searchInput.value), SEARCH_DEBOUNCE_MS);
  });

  return {
    canvas,
    notice,
    legend: key,
    panel,
    searchInput,
    searchCount,
    showAllButton,
    // Fills the thread filter once; later loads keep the options.
    needsThreads: () => threadSelect.options.length === 1,
    addThreads(threads) {
      for (const thread of threads) threadSelect.append(el("option", { value: thread.id }, threadTitle(thread)));
    },
    setStats(text) {
      stats.textContent = text;
    },
  };
}
