// Imported messages (chat histories brought in from ChatGPT, Claude, ...):
// their replies' provenance is unknown, so each counts every earlier message
// of its conversation as a source. These helpers mark them the same way
// everywhere.
import { el, plural } from "./dom.js";

const SOURCES = { chatgpt: "ChatGPT", claude: "Claude", dellm: "DeLLM export", jsonl: "JSONL" };

export function sourceName(importedFrom) {
  return SOURCES[importedFrom] || importedFrom;
}

export function importedBadge(message) {
  if (!message?.imported_from) return null;
  return el(
    "span",
    {
      class: "badge badge-imported",
      title: "Imported: its real provenance is unknown, so every earlier message of its conversation counts as a source.",
      dataset: { imported: message.imported_from },
    },
    `imported · ${sourceName(message.imported_from)}`,
  );
}

// The sentence a deletion preview shows when imported replies are among what goes.
export function importedCascadeNote(count) {
  if (!count) return null;
  return el(
    "p",
    { class: "imported-note", dataset: { importedCount: count } },
    el("strong", {}, `${plural(count, "imported reply", "imported replies")} will go`),
    ": their provenance is unknown, so every later reply of that conversation is treated as derived.",
  );
}
