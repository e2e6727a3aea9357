// Deleting from the graph: "Preview delete" highlights Dep(m) (the message
// and everything derived from it) and lists why each one goes; the form
// then picks the mode, confirms, deletes, and offers Undo. "Forget only
// part" previews the same for a phrase of a user message and offers the
// message without it (editable) in its place. Each function takes the
// GraphExplorer `x` (graph.js).
import { el, plural, replaceChildren, toast } from "../dom.js";
import { importedCascadeNote } from "../imported.js";
import { toolStepBadge, toolStepOf, toolStepsNote } from "../tool-steps.js";
import { roleTag } from "../model.js";
import { followRewrites, progressText, redactionEditor, regenerateChoice, rewriteCost, undoSummary } from "../rewrites.js";
import { confirmDialog, modePicker, pathLabel } from "../ui.js";
import { captionText } from "./elements.js";
import { center, fitBeside, showStats } from "./view.js";

function highlight(x, rootId, ids) {
  const members = x.cy.collection([x.node(rootId), ...ids.map((id) => x.node(id))].filter((node) => node?.length));
  x.cy.batch(() => {
    x.cy.elements().addClass("faded");
    members.removeClass("faded");
    members.edgesWith(members).removeClass("faded").addClass("dep");
    members.addClass("dep");
    x.node(rootId).removeClass("dep").addClass("dep-root");
  });
  x.edgeLayer?.highlight(members.map((node) => node.id()));
  fitBeside(x, members);
}

// Ids currently highlighted as Dep(m) (the root included), ascending.
export function highlighted(x) {
  return x.cy ? x.cy.nodes(".dep, .dep-root").map((node) => node.data("mid")).sort((a, b) => a - b) : [];
}

export function clearPreview(x) {
  x.preview = null;
  x.cy?.elements().removeClass("faded dep dep-root");
  x.edgeLayer?.highlight(null);
}

// A dependent another deletion removed already: this one changes nothing of it (a purge destroys a soft-deleted one's text).
const REMOVED = { deleted: "(deleted already)", purged: "(purged already)" };

function dependentList(x, dependents, seqOf) {
  if (!dependents.length) return el("p", { class: "muted small" }, "Nothing was built from it: only this message goes.");
  return el(
    "ol",
    { class: "dep-list" },
    dependents.map((item) =>
      el(
        "li",
        { dataset: { id: item.id } },
        el(
          "button",
          { type: "button", class: "neighbour", onclick: () => center(x, item.id) },
          el("span", { class: "seq" }, `#${item.seq}`),
          roleTag(item.role),
          toolStepBadge(toolStepOf(x.node(item.id))),
          el("span", { class: "neighbour-text" }, REMOVED[item.status] || captionText(x.node(item.id))),
        ),
        el("span", { class: "why" }, "via ", pathLabel(item.path, seqOf)),
      ),
    ),
  );
}

export async function previewDelete(x, message) {
  let answer;
  try {
    answer = await x.source.dependents(message.id);
  } catch (error) {
    toast(error.message, { kind: "error" });
    return;
  }
  if (x.selected !== message.id) return;
  x.preview = answer;
  // All of Dep(m) (`ids`), not only the nearest listed with their paths.
  highlight(x, message.id, answer.ids);
  // Dep(m) holds messages other deletions removed already: count what this one removes.
  const live = answer.live ?? answer.count;
  const total = live + 1;
  const already = answer.count - live;
  const seqOf = (id) => x.node(id)?.data("seq") ?? (id === message.id ? message.seq : answer.dependents.find((item) => item.id === id)?.seq);
  const picker = modePicker({ name: `${x.uid}-mode-${message.id}`, initial: "soft" });
  const replies = answer.dependents.filter((item) => item.role === "assistant").length;
  const rewrite = regenerateChoice({ name: `${x.uid}-regen-${message.id}`, count: replies ? null : 0 });
  const error = el("p", { class: "error-text", role: "alert" });
  const form = el(
    "form",
    { class: "preview-form" },
    rewrite.element,
    picker.element,
    error,
    el(
      "div",
      { class: "panel-actions" },
      el("button", { type: "button", class: "btn btn-quiet", onclick: () => { clearPreview(x); replaceChildren(x.previewBox); } }, "Clear preview"),
      el("button", { type: "submit", class: "btn btn-danger", dataset: { action: "delete" } }, `Delete ${plural(total, "message")}…`),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const choice = picker.choiceOrError(error);
    if (!choice) return;
    const derived = rewrite.value();
    let preview;
    try {
      // The server's preview says exactly which replies a rewrite would cost.
      preview = await x.source.previewDeletion({ select: { ids: [message.id] }, ...choice, derived });
    } catch (problem) {
      error.textContent = problem.message;
      return;
    }
    // The mode's own count: a purge also destroys what is only soft-deleted.
    const removes = preview.removes ?? total;
    const ok = await confirmDialog({
      title: `Delete ${plural(removes, "message")}?`,
      body: [
        el("p", {}, `#${message.seq}`, removes > 1 ? ` and ${plural(removes - 1, "message")} derived from it` : "", ` will be removed by ${picker.describe()}.`),
        derived === "regenerate" ? el("p", { class: "rewrite-cost" }, rewriteCost(preview.regenerate.length)) : null,
        choice.mode === "purge" ? el("p", { class: "error-text" }, "Purged text cannot be recovered.") : null,
      ],
      confirmLabel: `Delete ${plural(removes, "message")}`,
      danger: true,
    });
    if (!ok) {
      x.source.cancelDeletion?.(preview.id).catch(() => {});
      return;
    }
    try {
      await deleteMessage(x, message, preview);
    } catch (problem) {
      error.textContent = problem.message;
    }
  });
  replaceChildren(
    x.previewBox,
    el(
      "p",
      { class: "preview-summary" },
      el("strong", { dataset: { count: total } }, `Deleting #${message.seq} removes ${plural(total, "message")}`),
      live ? ": it and everything built from it." : ".",
      already ? ` ${plural(already, "message")} built from it ${already === 1 ? "is" : "are"} deleted already.` : "",
    ),
    importedCascadeNote(answer.dependents.filter((item) => item.role === "assistant" && x.node(item.id)?.data("imported") === "yes").length),
    toolStepsNote([message.id, ...answer.dependents.map((item) => item.id)].filter((id) => toolStepOf(x.node(id))).length),
    dependentList(x, answer.dependents, seqOf),
    form,
  );
}

// Forget only `phrase` of the user message: an exact selection of the phrase.
// Besides this message it may match only what was built from it (replies
// quoting it), so the deletion is exactly this message's Dep(m). The server
// proposes the message without the clauses that hold the phrase; the user
// edits or approves it.
export async function previewRedaction(x, message, phrase, error) {
  error.textContent = "";
  let preview;
  let answer;
  try {
    [preview, answer] = await Promise.all([
      x.source.previewDeletion({ select: { exact: phrase }, mode: "soft", derived: "regenerate" }),
      x.source.dependents(message.id),
    ]);
  } catch (problem) {
    error.textContent = problem.message;
    return;
  }
  const built = new Set(answer.ids);
  const elsewhere = preview.matched.filter((id) => id !== message.id && !built.has(id));
  const proposal = (preview.redactions || []).find((item) => item.message === message.id);
  if (elsewhere.length || !proposal || x.selected !== message.id) {
    await x.source.cancelDeletion?.(preview.id).catch(() => {});
    if (x.selected !== message.id) return;
    const seqs = elsewhere.map((id) => `#${x.node(id)?.data("seq") ?? id}`).join(" ");
    error.textContent = elsewhere.length
      ? `“${phrase}” is also in ${seqs}, not built from #${message.seq}: choose words found only here.`
      : `Nothing of #${message.seq} would be left: use Preview delete to forget it whole.`;
    return;
  }
  x.preview = preview;
  highlight(x, message.id, [...built]);
  const seqOf = (id) => x.node(id)?.data("seq") ?? (id === message.id ? message.seq : answer.dependents.find((item) => item.id === id)?.seq);
  const rewritten = new Set([...(preview.regenerate || []), ...proposal.regenerate]).size;
  const editor = redactionEditor({ proposals: [proposal], originals: new Map([[message.id, message]]) });
  const picker = modePicker({ name: `${x.uid}-redact-mode-${message.id}`, initial: "soft" });
  const problem = el("p", { class: "error-text", role: "alert" });
  const form = el(
    "form",
    { class: "preview-form redaction-form" },
    editor.element,
    el("p", { class: "rewrite-cost" }, rewriteCost(rewritten)),
    picker.element,
    problem,
    el(
      "div",
      { class: "panel-actions" },
      el("button", { type: "button", class: "btn btn-quiet", onclick: () => { x.source.cancelDeletion?.(preview.id).catch(() => {}); clearPreview(x); replaceChildren(x.previewBox); } }, "Clear preview"),
      el("button", { type: "submit", class: "btn btn-danger", dataset: { action: "redact" } }, "Forget this part…"),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const choice = picker.choiceOrError(problem);
    if (!choice) return;
    if (choice.mode === "expire") {
      problem.textContent = "Forgetting part of a message happens now: choose soft delete or purge.";
      return;
    }
    const redactions = editor.value();
    const kept = redactions[message.id];
    const ok = await confirmDialog({
      title: kept ? `Forget part of #${message.seq}?` : `Delete #${message.seq}?`,
      body: [
        kept ? el("p", {}, `#${message.seq} will be replaced by “${kept}”; the original is removed by ${picker.describe()}.`) : el("p", {}, `#${message.seq} will be removed whole by ${picker.describe()}.`),
        el("p", { class: "rewrite-cost" }, rewriteCost(rewritten)),
        choice.mode === "purge" ? el("p", { class: "error-text" }, "Purged text cannot be recovered.") : null,
      ],
      confirmLabel: kept ? "Forget this part" : `Delete #${message.seq}`,
      danger: true,
    });
    if (!ok) return;
    try {
      let chosen = preview;
      if (choice.mode !== preview.mode) {
        chosen = await x.source.previewDeletion({ select: { exact: phrase }, ...choice, derived: "regenerate" });
        x.source.cancelDeletion?.(preview.id).catch(() => {});
      }
      await deleteMessage(x, message, chosen, { derived: "regenerate", redactions });
    } catch (failure) {
      problem.textContent = failure.message;
    }
  });
  replaceChildren(
    x.previewBox,
    el("p", { class: "preview-summary" }, el("strong", { dataset: { count: answer.count + 1 } }, `Forgetting “${phrase}” from #${message.seq}`), answer.count ? ": what was built from it goes, its replies rewritten." : "."),
    dependentList(x, answer.dependents, seqOf),
    form,
  );
  editor.element?.querySelector("textarea")?.focus();
}

async function deleteMessage(x, message, preview, choices) {
  const done = await x.source.confirmDeletion(preview.id, choices);
  x.closePanel();
  if (done.status === "scheduled") {
    toast(`Scheduled: #${message.seq} and what derives from it go at ${new Date(done.expire_at).toLocaleString()}.`, { kind: "success" });
    await x.refresh();
    return done;
  }
  const removed = done.deleted.map((id) => x.node(id)).filter((node) => node?.length);
  if (x.filters.includeDeleted) {
    for (const node of removed) node.data("status", done.mode === "purge" ? "purged" : "deleted");
  } else {
    const gone = x.cy.collection(removed);
    const { cy, edgeLayer } = x;
    gone.addClass("leaving");
    setTimeout(() => {
      // A graph loaded meanwhile (Undo, a filter) is drawn from the server's answer: nothing to remove.
      if (x.cy !== cy) return;
      gone.remove();
      edgeLayer?.drop(gone.map((node) => node.id()));
      showStats(x);
    }, 260);
  }
  const undo =
    done.mode === "soft" && x.source.undoDeletion
      ? { label: "Undo", run: () => undoWithSummary(x, done) }
      : undefined;
  toast(`${plural(done.deleted.length, "message")} deleted.`, { kind: "success", action: undo });
  // A redacted message's replacement takes its place in the graph.
  if (Object.keys(done.redacted || {}).length) await x.refresh();
  x.host.dispatchEvent(new CustomEvent("explorer:deleted", { detail: done }));
  if (done.regeneration && x.source.deletion) watchRewrites(x, done);
  return done;
}

// The rewritten replies appear in the graph as they are written; the
// progress line stays under the toolbar until they are all done.
function watchRewrites(x, done) {
  const line = el("p", { class: "rewrite-progress", role: "status", dataset: { deletion: done.id } }, progressText(done.regeneration));
  x.host.querySelector(".rewrite-progress")?.remove();
  x.host.prepend(line);
  followRewrites(done.id, {
    onProgress: async (current) => {
      line.textContent = progressText(current.regeneration);
      await x.refresh();
      if (current.regeneration?.state !== "running") setTimeout(() => line.remove(), 4000);
    },
  });
}

// With rewrites, undo also removes them (and what was built from them): say so first.
async function undoWithSummary(x, done) {
  if ((done.regeneration || Object.keys(done.redacted || {}).length) && x.source.undoPreview) {
    const ok = await confirmDialog({ title: "Undo this deletion?", body: el("p", {}, await undoSummary(done.id)), confirmLabel: "Undo" });
    if (!ok) return;
  }
  await undoDeletion(x, done.id);
}

async function undoDeletion(x, deletionId) {
  try {
    await x.source.undoDeletion(deletionId);
    toast("Restored.", { kind: "success" });
    await x.refresh();
  } catch (error) {
    toast(error.message, { kind: "error" });
  }
}
