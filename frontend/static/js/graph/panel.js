// The side panel for the selected message: its text, where it came from,
// what was derived from it, and its actions (preview delete, focus, open in
// chat). Each function takes the GraphExplorer `x` (graph.js).
import { el, formatWhen, replaceChildren, toast } from "../dom.js";
import { isLive, roleTag } from "../model.js";
import { trapFocus } from "../ui.js";
import { clearPreview, previewDelete, previewRedaction } from "./cascade.js";
import { captionText } from "./elements.js";
import { center, focusOn, keepClearOfPanel, showAll } from "./view.js";

export async function select(x, id, { center: centre = false } = {}) {
  const node = x.node(id);
  if (!node?.length) {
    toast("That message is not in the graph (deleted, or filtered out).", { kind: "info" });
    return;
  }
  if (x.focused && node.hasClass("outside")) showAll(x);
  clearPreview(x);
  x.cy.nodes().unselect();
  node.select();
  x.selected = id;
  openPanel(x, el("p", { class: "muted" }, "Loading…"), node.data());
  if (centre) center(x, id);
  else keepClearOfPanel(x, node);
  let message;
  try {
    message = await x.source.message(id);
  } catch (error) {
    fillPanel(x, el("p", { class: "error-text" }, error.message));
    return;
  }
  if (x.selected === id) fillPanel(x, details(x, message));
}

function openPanel(x, content, data) {
  const panel = x.dom.panel;
  const close = el("button", { type: "button", class: "panel-close", "aria-label": "Close panel", onclick: () => closePanel(x, { refocus: true }) }, "×");
  replaceChildren(
    panel,
    el(
      "header",
      { class: "panel-head" },
      el("h2", { id: `${x.uid}-panel-title` }, `#${data.seq}`, " ", roleTag(data.role)),
      el("span", { class: `badge badge-status-${data.status}` }, data.status),
      close,
    ),
    el("div", { class: "panel-body" }, content),
  );
  panel.hidden = false;
  x.host.classList.add("panel-open");
  x.releaseFocus?.();
  x.releaseFocus = trapFocus(panel, { onEscape: () => closePanel(x, { refocus: true }) });
  close.focus();
}

function fillPanel(x, content) {
  const body = x.dom.panel.querySelector(".panel-body");
  if (body) replaceChildren(body, content);
}

export function closePanel(x, { refocus = false } = {}) {
  const panel = x.dom.panel;
  if (panel.hidden) return;
  clearPreview(x);
  panel.hidden = true;
  x.host.classList.remove("panel-open");
  x.cy?.nodes().unselect();
  x.selected = null;
  const release = x.releaseFocus;
  x.releaseFocus = null;
  release?.();
  if (refocus) x.dom.canvas.focus();
}

// Buttons for the messages among `ids` that are in the graph; a click selects one.
function neighbourList(x, ids, emptyText) {
  const present = ids.filter((id) => x.node(id)?.length);
  if (!present.length) return el("p", { class: "muted small" }, emptyText);
  return el(
    "ul",
    { class: "neighbours" },
    present.map((id) => {
      const node = x.node(id);
      return el(
        "li",
        {},
        el(
          "button",
          { type: "button", class: "neighbour", dataset: { id }, onclick: () => select(x, id, { center: true }) },
          el("span", { class: "seq" }, `#${node.data("seq")}`),
          roleTag(node.data("role")),
          el("span", { class: "neighbour-text" }, captionText(node)),
        ),
      );
    }),
  );
}

function actions(x, message) {
  const live = isLive(message.status);
  const row = el("div", { class: "panel-actions" });
  if (!x.readOnly && live) {
    row.append(el("button", { type: "button", class: "btn btn-danger-quiet", dataset: { action: "preview-delete" }, onclick: () => previewDelete(x, message) }, "Preview delete"));
  }
  row.append(el("button", { type: "button", class: "btn btn-quiet", onclick: () => focusOn(x, message.id) }, "Focus neighbourhood"));
  if (x.links.chat && live) {
    row.append(el("a", { class: "btn btn-quiet", href: x.links.chat(message) }, "Open in chat"));
  }
  return row;
}

// "Forget only part…": a phrase of the user message, previewed as a redaction (cascade.js).
function partForm(x, message) {
  const id = `${x.uid}-part-${message.id}`;
  const phrase = el("input", { type: "text", id, class: "part-phrase", maxlength: 500, autocomplete: "off", placeholder: "Words to forget, as written" });
  const error = el("p", { class: "error-text", role: "alert" });
  const form = el(
    "form",
    { class: "part-form" },
    el("label", { for: id }, "Forget only part…"),
    el("div", { class: "part-row" }, phrase, el("button", { type: "submit", class: "btn btn-danger-quiet", dataset: { action: "preview-redact" } }, "Preview")),
    error,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const words = phrase.value.trim();
    if (!words || !message.content.toLowerCase().includes(words.toLowerCase())) {
      error.textContent = `Type words that occur in #${message.seq}.`;
      phrase.focus();
      return;
    }
    clearPreview(x);
    replaceChildren(x.previewBox);
    previewRedaction(x, message, words, error);
  });
  // Words selected in the message's text fill the field.
  form.takeSelection = () => {
    const picked = document.getSelection()?.toString().trim();
    if (picked) phrase.value = picked;
  };
  return form;
}

function details(x, message) {
  const content =
    message.status === "purged"
      ? el("p", { class: "muted" }, "Purged: the text was destroyed. Only this tombstone keeps the graph's shape.")
      : el("div", { class: "panel-content" }, message.content);
  const part = !x.readOnly && isLive(message.status) && message.role === "user" ? partForm(x, message) : null;
  if (part) content.addEventListener("mouseup", part.takeSelection);
  // Where the cascade preview (cascade.js) draws.
  x.previewBox = el("div", { class: "preview-box", "aria-live": "polite" });
  return [
    el("p", { class: "panel-when muted small" }, formatWhen(message.said_at ?? message.created_at), message.thread ? ` · thread ${message.thread}` : ""),
    content,
    actions(x, message),
    part,
    x.previewBox,
    el("h3", {}, "Came from"),
    neighbourList(x, message.context, message.role === "user" ? "Nothing: you wrote it." : "No earlier messages in view."),
    el("h3", {}, "Derived"),
    neighbourList(x, message.derived, "Nothing was built from it yet."),
  ];
}
