// The conversation: one <li> per message (author, seq, time, status, text;
// memory chips under replies), scrolling, and messages leaving after a deletion.
import { el, replaceChildren, timeEl } from "../dom.js";
import { importedBadge } from "../imported.js";
import { roleLabel } from "../model.js";
import { watchExpiry } from "./expiry.js";
import { memoryChips } from "./memory-chips.js";
import { page, state } from "./state.js";

function nearBottom() {
  const { scroller } = page;
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
}

// Follows new content down, unless the reader scrolled up (or `force`).
export function scrollToEnd(force = false) {
  if (force || nearBottom()) page.scroller.scrollTop = page.scroller.scrollHeight;
}

// The user message a reply answers: the latest user message before it that
// is in its context (always there: the context includes the question).
function answeredId(reply, before) {
  const context = new Set(reply.context);
  for (let index = before.length - 1; index >= 0; index -= 1) {
    const message = before[index];
    if (message.role === "user" && context.has(message.id)) return message.id;
  }
  return null;
}

// A `/v1` client's tool steps are shown as compact lines, not bubbles: a call
// per call as `called name(arguments)`, a result with the call it answers.
// Their text is the model's and the tool's, so it goes in as text nodes only.
const ARGUMENTS_SHOWN = 60;
const RESULT_SHOWN = 160;

function truncated(text, limit) {
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function toolStepBody(message) {
  if (message.role === "tool") {
    return el(
      "div",
      { class: "msg-body tool-steps" },
      el("div", { class: "tool-step role-tool", title: message.content }, `tool result for ${message.tool_call_id}: ${truncated(message.content, RESULT_SHOWN)}`),
    );
  }
  return el(
    "div",
    { class: "msg-body tool-steps" },
    message.content ? el("div", { class: "tool-step-text" }, message.content) : null,
    message.tool_calls.map((call) =>
      el("div", { class: "tool-step role-tool", title: call.arguments }, `called ${call.name}(${truncated(call.arguments, ARGUMENTS_SHOWN)})`),
    ),
  );
}

export function messageItem(message, questionId = null) {
  const mine = message.role === "user";
  // A client's system prompt (OpenAI-compatible endpoint): shown where it was first sent, without chips.
  const system = message.role === "system";
  const toolStep = message.role === "tool" || Boolean(message.tool_calls?.length);
  const item = el(
    "li",
    { class: `msg ${mine ? "msg-user" : system ? "msg-system" : "msg-assistant"}`, id: `m-${message.id}`, dataset: { id: message.id, seq: message.seq } },
    el(
      "div",
      { class: "msg-meta" },
      el("span", { class: "msg-author" }, roleLabel(message.role, { byline: true })),
      el("a", { class: "msg-seq", href: `${page.graphUrl}?focus=${message.id}`, title: "Open in the memory graph" }, `#${message.seq}`),
      timeEl(message.said_at ?? message.created_at),
      message.status === "expiring" ? el("span", { class: "badge badge-scheduled" }, "expiring") : null,
      importedBadge(message),
      message.replaces
        ? el("span", { class: "badge badge-rewritten", title: "Rewritten without what you asked to forget" }, mine ? "redacted" : "rewritten")
        : null,
    ),
    toolStep ? toolStepBody(message) : el("div", { class: "msg-body" }, message.content),
  );
  if (message.status === "expiring") watchExpiry(message, removeMessages);
  if (toolStep) item.classList.add("msg-tool-step");
  if (message.imported_from) item.classList.add("msg-imported");
  if (message.imported_from && !mine) {
    // An imported reply's context is every earlier message of its conversation: no chips to pick from.
    item.append(
      el("div", { class: "chips" }, el("span", { class: "chips-label" }, "Imported reply: provenance unknown, so every earlier message of this conversation counts as its source")),
    );
  } else if (!mine && !system) item.append(memoryChips(message, questionId));
  return item;
}

function conversationItems(messages) {
  return messages.map((message, index) =>
    messageItem(message, message.role === "user" ? null : answeredId(message, messages.slice(0, index))),
  );
}

export function renderConversation(messages) {
  replaceChildren(page.messageList, conversationItems(messages));
  updateEmpty();
}

// Older messages go on top; what the reader was looking at stays where it was.
export function prependConversation(messages) {
  const { scroller } = page;
  const fromBottom = scroller.scrollHeight - scroller.scrollTop;
  page.messageList.prepend(...conversationItems(messages));
  scroller.scrollTo({ top: scroller.scrollHeight - fromBottom, behavior: "instant" });
  updateEmpty();
}

export function updateEmpty() {
  page.emptyState.hidden = page.messageList.children.length > 0;
}

export function removeMessages(ids) {
  for (const id of ids) {
    state.known.delete(id);
    const item = document.getElementById(`m-${id}`);
    if (!item) continue;
    item.classList.add("msg-leaving");
    item.addEventListener("animationend", () => {
      item.remove();
      updateEmpty();
    });
  }
}
