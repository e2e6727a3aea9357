// Under each reply, the memories it used: one chip per message of its context
// other than the question, linking to that message in the memory graph, and
// saying why it was used (the signal that found it: same words, similar
// meaning, or both; a supplied reply's whole transcript; the system prompt;
// nothing for contexts taken by position).
import { messagesById } from "../api.js";
import { el, snippet } from "../dom.js";
import { roleLabel } from "../model.js";
import { page, state } from "./state.js";

export const SIGNAL_REASONS = {
  lexical: "same words",
  vector: "similar meaning",
  both: "same words and similar meaning",
  transcript: "everything before it in the conversation",
  system: "the system prompt it was written under",
  agent: "an agent said it used it",
};

function reasonOf(chip) {
  const reason = SIGNAL_REASONS[chip.dataset.signal];
  return reason ? `used for: ${reason}; ` : "";
}

// Seq and snippet for each chip whose message is known (state.known).
function fill(chips) {
  for (const chip of chips) {
    const message = state.known.get(Number(chip.dataset.id));
    if (!message) continue;
    chip.textContent = `#${message.seq}`;
    chip.title = `${roleLabel(message.role, { byline: true })}: ${snippet(message.content, 100)} (${reasonOf(chip)}open in the memory graph)`;
  }
}

export function memoryChips(reply, questionId) {
  const used = reply.context.filter((id) => id !== questionId);
  const row = el("div", { class: "chips", dataset: { chipsFor: reply.id } });
  if (!used.length) {
    row.append(el("span", { class: "chips-label" }, "No memory used"));
    return row;
  }
  row.append(el("span", { class: "chips-label" }, "Used memory:"));
  // `context_detail` carries each edge's signal; a reply from an older server has none.
  const signals = new Map((reply.context_detail || []).map((item) => [item.id, item.signal]));
  const chips = used.map((id) => {
    const dataset = { id };
    if (signals.get(id)) dataset.signal = signals.get(id);
    const chip = el("a", { class: "chip", href: `${page.graphUrl}?focus=${id}`, dataset, title: "Open in the memory graph" }, "#…");
    chip.title = `${reasonOf(chip)}open in the memory graph`;
    return chip;
  });
  row.append(...chips);
  const missing = used.filter((id) => !state.known.has(id));
  if (missing.length) {
    messagesById(missing)
      .then((found) => {
        for (const [id, message] of found) if (message) state.known.set(id, message);
        fill(chips);
      })
      .catch(() => {});
  }
  fill(chips);
  return row;
}
