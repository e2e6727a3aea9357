// The inline card for a deletion request typed in the chat: what will go,
// how many, and why; then the mode and Confirm / Cancel. The request text
// itself is never shown again: it may hold the very thing to forget.
import { api, messagesById } from "./api.js";
import { el, plural, replaceChildren, snippet, toast } from "./dom.js";
import { roleTag } from "./model.js";
import { importedBadge, importedCascadeNote } from "./imported.js";
import { toolStepBadge, toolStepsNote } from "./tool-steps.js";
import { agentReadsNote, readByBadge, readersByMessage } from "./agent-reads.js";
import { factsEffect, previewExtraIds, relatedPicker } from "./preview-facts.js";
import { followRewrites, progressText, redactionEditor, regenerateChoice, undoSummary } from "./rewrites.js";
import { confirmDialog, modeLabel, modePicker, pathLabel } from "./ui.js";

const SHOWN = 6;
let cards = 0;

export function deletionCard(deletion, { onDeleted, onUndone, deletionsUrl }) {
  cards += 1;
  const titleId = `deletion-card-${cards}`;
  const body = el("div", { class: "dcard-body" }, el("p", { class: "muted" }, "Looking up the messages…"));
  const card = el(
    "li",
    { class: "dcard", role: "group", "aria-labelledby": titleId, tabindex: "-1", dataset: { deletion: deletion.id } },
    el(
      "div",
      { class: "dcard-head" },
      el("span", { class: "dcard-icon", "aria-hidden": "true" }, "⌫"),
      el("h3", { id: titleId }, "Forget request"),
      el("span", { class: "badge badge-preview" }, "Preview · nothing deleted yet"),
    ),
    body,
  );
  const badge = card.querySelector(".badge");

  function settle(kind, text, ...extra) {
    // A button disabled while its request ran has lost the focus to the body already.
    const focused = card.contains(document.activeElement) || document.activeElement === document.body;
    badge.className = `badge badge-${kind}`;
    badge.textContent = text;
    card.dataset.state = kind;
    replaceChildren(body, ...extra);
    // The pressed button is gone: the keyboard stays on the card (its next action), not back at the page's top.
    if (focused) (body.querySelector("button, a[href]") || card).focus();
  }

  async function cancel() {
    try {
      await api.cancelDeletion(deletion.id);
      settle("cancelled", "Cancelled", el("p", { class: "muted" }, "Nothing was deleted."));
    } catch (error) {
      toast(error.message, { kind: "error" });
    }
  }

  if (deletion.total === 0) {
    settle(
      "empty",
      "Nothing matches",
      el("p", {}, "Nothing in your memory matches this request, so nothing will be deleted."),
      el("div", { class: "dcard-actions" }, el("button", { type: "button", class: "btn btn-quiet", onclick: cancel }, "Dismiss")),
    );
    return card;
  }

  // What else says the same comes with the first preview only; ticking it makes a new preview
  // of what was asked plus the ticked ids (a preview's selection is fixed), shown in this card.
  const related = deletion.related || [];
  // A request naming an identifier: what it was read as (a preview by ids, after a tick, says nothing).
  const resolution = deletion.resolution;
  const asked = deletion.matched;
  const ticked = new Set();
  let ids;
  function load() {
    ids = [...deletion.matched, ...deletion.dependents];
    messagesById([...ids, ...previewExtraIds({ facts: deletion.facts, related })])
      .then((found) => render(found))
      .catch((error) => replaceChildren(body, el("p", { class: "error-text" }, error.message)));
  }
  load();

  async function include(id, on) {
    if (on) ticked.add(id);
    else ticked.delete(id);
    body.querySelectorAll("input, button, textarea").forEach((item) => (item.disabled = true));
    try {
      const fresh = await api.previewDeletion({ mode: "soft", select: { ids: [...asked, ...ticked] } });
      await api.cancelDeletion(deletion.id);
      deletion = fresh;
      card.dataset.deletion = fresh.id;
    } catch (error) {
      toast(error.message, { kind: "error" });
      if (on) ticked.delete(id);
      else ticked.add(id);
    }
    load();
  }

  function render(found) {
    const seqOf = (id) => found.get(id)?.seq;
    const matched = new Set(deletion.matched);
    const toolKinds = new Map((deletion.tool_steps || []).map((step) => [step.id, step.kind]));
    const readers = readersByMessage(deletion.agent_reads);
    const items = ids.map((id) => {
      const message = found.get(id);
      const why = matched.has(id)
        ? el("span", { class: "why" }, importedBadge(message), toolStepBadge(toolKinds.get(id)), readByBadge(readers.get(id)), " matches your request")
        : el("span", { class: "why" }, importedBadge(message), toolStepBadge(toolKinds.get(id)), readByBadge(readers.get(id)), " built from ", pathLabel(deletion.explanations[id] || [id], seqOf));
      return el(
        "li",
        { class: "ditem", dataset: { id } },
        el("span", { class: "seq" }, `#${message?.seq ?? "?"}`),
        roleTag(message?.role),
        el("span", { class: "ditem-text" }, message ? snippet(message.content, 120) || (toolKinds.get(id) === "call" ? "(tool call)" : "(empty)") : "(no longer available)"),
        why,
      );
    });
    const list = el("ol", { class: "ditems" }, items.slice(0, SHOWN));
    const more =
      items.length > SHOWN
        ? el(
            "button",
            {
              type: "button",
              class: "btn btn-link",
              onclick: (event) => {
                replaceChildren(list, items);
                event.currentTarget.remove();
              },
            },
            `Show all ${items.length}`,
          )
        : null;
    const picker = modePicker({ name: `dmode-${deletion.id}`, initial: deletion.mode });
    const proposals = deletion.redactions || [];
    const rewritable = new Set([...(deletion.regenerate || []), ...proposals.flatMap((p) => p.regenerate)]);
    const rewrite = regenerateChoice({ name: `dregen-${deletion.id}`, count: rewritable.size, checked: proposals.length > 0 || deletion.derived === "regenerate" });
    const redactions = redactionEditor({ proposals, originals: found });
    // Dep holds messages other deletions removed already: the preview counts what confirming changes now.
    const removes = deletion.removes ?? deletion.total;
    const already = deletion.total - removes;
    const confirmButton = el("button", { type: "submit", class: "btn btn-danger" }, `Delete ${plural(removes, "message")}`);
    const error = el("p", { class: "error-text", role: "alert" });
    const form = el(
      "form",
      { class: "dcard-form" },
      redactions.element,
      rewrite.element,
      picker.element,
      error,
      el("div", { class: "dcard-actions" }, el("button", { type: "button", class: "btn btn-quiet", onclick: cancel }, "Cancel"), confirmButton),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const choice = picker.choiceOrError(error);
      if (!choice) return;
      confirmButton.disabled = true;
      try {
        const done = await confirmAs(choice, { derived: rewrite.value(), redactions: redactions.value() });
        settled(done, seqOf);
      } catch (problem) {
        error.textContent = problem.message;
        confirmButton.disabled = false;
      }
    });
    replaceChildren(
      body,
      el(
        "p",
        { class: "dcard-summary" },
        el("strong", {}, `${plural(removes, "message")} will be deleted`),
        `: ${plural(deletion.matched.length, "message")} matching your request`,
        deletion.dependents.length ? ` and ${plural(deletion.dependents.length, "reply", "replies")} built from them.` : ".",
        already ? ` ${plural(already, "of them is", "of them are")} deleted already.` : "",
      ),
      resolution
        ? el("p", { class: "dcard-resolution muted small", dataset: { testid: "resolution" } }, `Matched as ${resolution.named.map((named) => named.as).join(", ")}, however written; no other is taken.`)
        : null,
      importedCascadeNote(deletion.imported_dependents?.length || 0),
      toolStepsNote(toolKinds.size),
      agentReadsNote(deletion.agent_reads),
      factsEffect(deletion.facts, found),
      list,
      relatedPicker({ related, found, ticked, inside: ids, name: `${titleId}-related`, onToggle: include }),
      more,
      form,
    );
    form.querySelector("input[type=radio]:checked")?.focus();
  }

  // The chat previews a soft deletion; another mode is a new preview of the same messages.
  // Redaction happens at confirm, so an expiry keeps only the rewrite choice.
  async function confirmAs(choice, extras) {
    if (choice.mode === deletion.mode && !choice.expire_at) {
      return api.confirmDeletion(deletion.id, extras);
    }
    const preview = await api.previewDeletion({ select: { ids: deletion.matched }, ...choice, derived: extras.derived });
    const done = await api.confirmDeletion(preview.id, choice.expire_at ? { derived: extras.derived } : extras);
    await api.cancelDeletion(deletion.id);
    return done;
  }

  let rewrites = null;

  function settled(done, seqOf) {
    const history = el("a", { href: deletionsUrl, class: "btn btn-link" }, "Deletion history");
    if (done.status === "scheduled") {
      settle(
        "scheduled",
        "Scheduled",
        el("p", {}, `These messages will be deleted at ${new Date(done.expire_at).toLocaleString()}, with anything derived from them by then.`),
        el("div", { class: "dcard-actions" }, history),
      );
      onDeleted(done, []);
      return;
    }
    const actions = el("div", { class: "dcard-actions" }, history);
    if (done.mode === "soft") {
      actions.prepend(
        el(
          "button",
          {
            type: "button",
            class: "btn btn-quiet",
            onclick: async () => {
              try {
                if (done.regeneration || Object.keys(done.redacted || {}).length) {
                  const ok = await confirmDialog({ title: "Undo this deletion?", body: el("p", {}, await undoSummary(done.id)), confirmLabel: "Undo" });
                  if (!ok) return;
                }
                rewrites?.stop();
                await api.undoDeletion(done.id);
                settle("undone", "Undone", el("p", {}, "Restored: the messages are back in memory."), el("div", { class: "dcard-actions" }, history));
                onUndone(done);
              } catch (problem) {
                toast(problem.message, { kind: "error" });
              }
            },
          },
          "Undo",
        ),
      );
    }
    const seqs = done.deleted.map((id) => `#${seqOf(id) ?? id}`).join(" ");
    const redacted = Object.keys(done.redacted || {}).length;
    const progress = done.regeneration ? el("p", { class: "rewrite-progress", role: "status" }, progressText(done.regeneration)) : null;
    settle(
      "done",
      modeLabel(done.mode) === "Purge" ? "Purged" : "Deleted",
      el("p", {}, `${plural(done.deleted.length, "message")} deleted (${modeLabel(done.mode).toLowerCase()}): ${seqs}.`),
      redacted ? el("p", {}, `${plural(redacted, "message")} kept without what you asked to forget.`) : null,
      progress,
      actions,
    );
    if (progress) {
      rewrites = followRewrites(done.id, {
        onProgress: (current) => {
          progress.textContent = progressText(current.regeneration);
        },
      });
    }
    onDeleted(done, done.deleted);
  }

  return card;
}
