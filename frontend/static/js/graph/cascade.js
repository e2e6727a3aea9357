// Deleting from the graph: "Preview delete" highlights Dep(m) (the message
// and everything derived from it) and lists why each one goes; the form
// then picks the mode, confirms, deletes, and offers Undo. Each function
// takes the GraphExplorer `x` (graph.js).
import { el, plural, replaceChildren, toast } from "../dom.js";
import { importedCascadeNote } from "../imported.js";
import { roleTag } from "../model.js";
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
  fitBeside(x, members);
}

// Ids currently highlighted as Dep(m) (the root included), ascending.
export function highlighted(x) {
  return x.cy ? x.cy.nodes(".dep, .dep-root").map((node) => node.data("mid")).sort((a, b) => a - b) : [];
}

export function clearPreview(x) {
  x.preview = null;
  x.cy?.elements().removeClass("faded dep dep-root");
}

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
          el("span", { class: "neighbour-text" }, captionText(x.node(item.id))),
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
  highlight(x, message.id, answer.dependents.map((item) => item.id));
  const total = answer.count + 1;
  const seqOf = (id) => x.node(id)?.data("seq") ?? (id === message.id ? message.seq : answer.dependents.find((item) => item.id === id)?.seq);
  const picker = modePicker({ name: `${x.uid}-mode-${message.id}`, initial: "soft" });
  const error = el("p", { class: "error-text", role: "alert" });
  const form = el(
    "form",
    { class: "preview-form" },
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
      await deleteMessage(x, message, choice);
    } catch (problem) {
      error.textContent = problem.message;
    }
  });
  replaceChildren(
    x.previewBox,
    el("p", { class: "preview-summary" }, el("strong", { dataset: { count: total } }, `Deleting #${message.seq} removes ${plural(total, "message")}`), answer.count ? ": it and everything built from it." : "."),
    importedCascadeNote(answer.dependents.filter((item) => item.role === "assistant" && x.node(item.id)?.data("imported") === "yes").length),
    dependentList(x, answer.dependents, seqOf),
    form,
  );
}

async function deleteMessage(x, message, choice) {
  const preview = await x.source.previewDeletion({ select: { ids: [message.id] }, ...choice });
  const done = await x.source.confirmDeletion(preview.id);
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
    gone.addClass("leaving");
    setTimeout(() => {
      gone.remove();
      showStats(x);
    }, 260);
  }
  const undo =
    done.mode === "soft" && x.source.undoDeletion
      ? { label: "Undo", run: () => undoDeletion(x, done.id) }
      : undefined;
  toast(`${plural(done.deleted.length, "message")} deleted.`, { kind: "success", action: undo });
  x.host.dispatchEvent(new CustomEvent("explorer:deleted", { detail: done }));
  return done;
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
