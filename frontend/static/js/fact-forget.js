// Forgetting a fact from the facts page: a soft deletion's preview of the
// fact and the messages it came from (what goes, what happens to other
// facts, what else says the same, unticked), then Confirm. A preview's
// selection is fixed, so ticking a related item makes a new preview.
import { api, messagesById } from "./api.js";
import { el, plural, replaceChildren, toast } from "./dom.js";
import { factsEffect, previewExtraIds, relatedPicker } from "./preview-facts.js";

export function forgetPanel(fact, { onDone, onClose }) {
  const base = [fact.id, ...fact.sources.map((source) => source.id)];
  const ticked = new Set();
  let related = null;
  let preview = null;
  const body = el("div", { class: "fact-forget-body" }, el("p", { class: "muted" }, "Looking up what goes…"));
  const panel = el("div", { class: "fact-forget", role: "group", "aria-label": "Forget this fact", dataset: { testid: "forget-panel" } }, body);

  async function show(ids) {
    const fresh = await api.previewDeletion({ mode: "soft", select: { ids } });
    // Only the first preview lists what else says the same: later ones hold some of it.
    related ??= fresh.related || [];
    if (preview) await api.cancelDeletion(preview.id).catch(() => {});
    preview = fresh;
    const found = await messagesById(previewExtraIds({ facts: fresh.facts, related }));
    render(found);
  }

  async function toggle(id, on) {
    if (on) ticked.add(id);
    else ticked.delete(id);
    panel.querySelectorAll("input, button").forEach((item) => (item.disabled = true));
    try {
      await show([...base, ...ticked]);
    } catch (error) {
      toast(error.message, { kind: "error" });
    }
  }

  async function cancel() {
    if (preview) await api.cancelDeletion(preview.id).catch(() => {});
    onClose();
  }

  async function confirm(event) {
    event.currentTarget.disabled = true;
    try {
      const done = await api.confirmDeletion(preview.id, {});
      toast(`Forgotten: ${plural(done.deleted.length, "message")} deleted.`, { kind: "success" });
      onDone(done);
    } catch (error) {
      toast(error.message, { kind: "error" });
      event.currentTarget.disabled = false;
    }
  }

  function render(found) {
    const removes = preview.removes ?? preview.total;
    const built = Math.max(preview.total - base.length - ticked.size, 0);
    replaceChildren(
      body,
      el(
        "p",
        { class: "fact-forget-summary" },
        el("strong", { dataset: { count: removes } }, `${plural(removes, "message")} will be deleted`),
        `: this fact, ${plural(fact.sources.length, "message")} it came from`,
        ticked.size ? `, ${ticked.size} you ticked` : "",
        built ? ` and ${plural(built, "reply", "replies")} built from them.` : ".",
      ),
      factsEffect(preview.facts, found),
      relatedPicker({ related, found, ticked, inside: [...preview.matched, ...preview.dependents], name: `related-${fact.id}`, onToggle: toggle }),
      el(
        "div",
        { class: "dcard-actions" },
        el("button", { type: "button", class: "btn btn-quiet", onclick: cancel }, "Cancel"),
        el("button", { type: "button", class: "btn btn-danger", onclick: confirm }, `Delete ${plural(removes, "message")}`),
      ),
    );
  }

  show(base).catch((error) => replaceChildren(body, el("p", { class: "error-text" }, error.message), el("button", { type: "button", class: "btn btn-quiet", onclick: onClose }, "Close")));
  return panel;
}
