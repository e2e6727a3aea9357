// What a deletion preview says beyond its messages (docs/API.md, "Facts"):
// the facts it removes, draws again from what stays and brings back, and the
// related information outside it, offered unticked. Shared by the chat's
// deletion card and the facts page.
import { el, plural, snippet } from "./dom.js";
import { roleTag } from "./model.js";

// The ids a caller fetches (messagesById) so that `factsEffect` and `relatedPicker` can show their words.
export function previewExtraIds(deletion) {
  const facts = deletion.facts || {};
  return [...(facts.removed || []), ...(facts.reinstated || []).map((item) => item.fact), ...(deletion.related || []).map((item) => item.id)];
}

// A line of counts, then one line per fact it names; null when no fact changes.
export function factsEffect(facts, found = new Map()) {
  const removed = facts?.removed || [];
  const rederived = facts?.rederived || [];
  const reinstated = facts?.reinstated || [];
  if (!removed.length && !reinstated.length) return null;
  const counts = [`${plural(removed.length, "fact")} removed`];
  if (rederived.length) counts.push(`${rederived.length} drawn again from what stays`);
  if (reinstated.length) counts.push(`${plural(reinstated.length, "older fact")} current again`);
  const again = new Set(rederived.map((item) => item.fact));
  const line = (id, what) => {
    const fact = found.get(id);
    return el("li", { dataset: { fact: id } }, el("span", { class: "facts-effect-what" }, what), " ", fact ? snippet(fact.content, 100) : `#${id}`);
  };
  return el(
    "div",
    { class: "facts-effect", dataset: { testid: "facts-effect" } },
    el("p", {}, el("strong", {}, "Facts: "), counts.join(" · "), "."),
    el("ul", {}, removed.map((id) => line(id, again.has(id) ? "drawn again:" : "removed:")), reinstated.map((item) => line(item.fact, "current again:"))),
  );
}

// Checkboxes, all unticked at first, for the user's other messages and facts
// that say the same; `onToggle(id, ticked)` makes the new preview. One that a
// later preview holds already (`inside`, its matched and dependents) is not offered again.
export function relatedPicker({ related, found = new Map(), ticked = new Set(), inside = [], name, onToggle }) {
  const held = new Set(inside);
  const offered = (related || []).filter((item) => ticked.has(item.id) || !held.has(item.id));
  if (!offered.length) return null;
  return el(
    "fieldset",
    { class: "related", dataset: { testid: "related" } },
    el("legend", {}, "Also says this (not included)"),
    el("p", { class: "muted small" }, "Tick one to forget it too."),
    el(
      "ul",
      {},
      offered.map((item) => {
        const id = `${name}-${item.id}`;
        const message = found.get(item.id);
        return el(
          "li",
          { dataset: { id: item.id } },
          el("input", { type: "checkbox", id, value: item.id, checked: ticked.has(item.id), onchange: (event) => onToggle(item.id, event.target.checked) }),
          el(
            "label",
            { for: id },
            el("span", { class: "seq" }, `#${message?.seq ?? "?"}`),
            " ",
            roleTag(item.kind === "fact" ? "fact" : message?.role || "user"),
            " ",
            el("span", { class: "related-text" }, message ? snippet(message.content, 100) : "(no longer available)"),
            el("span", { class: "why" }, item.reason),
          ),
        );
      }),
    ),
  );
}
