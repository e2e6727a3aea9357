// Forgetting precisely, shared by the chat's deletion card and the graph's
// panel: the "rewrite what was derived" choice with its cost, the redacted
// texts on offer (editable), and following a deletion's rewrites to the end.
import { api } from "./api.js";
import { el, plural } from "./dom.js";

// "12 replies will be rewritten without this memory: 12 model calls".
export function rewriteCost(count) {
  if (!count) return "No reply needs rewriting: nothing built from it answers a question that stays.";
  return `${plural(count, "reply", "replies")} will be rewritten without this memory: ${plural(count, "model call")}.`;
}

// A checkbox: delete the derived replies (unchecked) or rewrite them (checked).
// `count` null: not known yet (the confirmation shows the cost).
export function regenerateChoice({ name, count, checked = false }) {
  const box = el("input", { type: "checkbox", name, checked: checked && count !== 0, disabled: count === 0, dataset: { choice: "regenerate" } });
  const cost = count === null ? "The cost is shown before anything happens." : rewriteCost(count);
  const element = el(
    "label",
    { class: "rewrite-choice" },
    box,
    el("span", {}, el("strong", {}, "Rewrite the replies built from it"), " instead of deleting them. ", el("span", { class: "muted", dataset: { cost: count ?? "" } }, cost)),
  );
  return { element, value: () => (box.checked ? "regenerate" : "delete") };
}

// One editable redaction per offered message: keep the rest of it (checked) or delete it whole.
export function redactionEditor({ proposals, originals }) {
  const rows = proposals.map((proposal) => {
    const keep = el("input", { type: "checkbox", checked: true, dataset: { keep: proposal.message } });
    const text = el("textarea", { class: "redaction-text", rows: 2, "aria-label": "The message, kept without what you asked to forget", dataset: { redaction: proposal.message } });
    text.value = proposal.text;
    keep.addEventListener("change", () => {
      text.disabled = !keep.checked;
    });
    const original = originals.get(proposal.message);
    return {
      proposal,
      keep,
      text,
      element: el(
        "div",
        { class: "redaction", dataset: { message: proposal.message } },
        el("label", { class: "redaction-keep" }, keep, el("span", {}, "Forget only this part of ", el("strong", {}, original ? `#${original.seq}` : "your message"), "; keep:")),
        text,
      ),
    };
  });
  const element = rows.length
    ? el("fieldset", { class: "redactions" }, el("legend", {}, "Keep the rest of your message"), rows.map((row) => row.element))
    : null;
  return {
    element,
    // {message id: approved text} for the kept ones; an emptied text deletes the whole message.
    value() {
      const chosen = {};
      for (const row of rows) {
        if (row.keep.checked && row.text.value.trim()) chosen[row.proposal.message] = row.text.value;
      }
      return chosen;
    },
  };
}

export function progressText(regeneration) {
  if (!regeneration) return "";
  const { state, total, rewritten, failed } = regeneration;
  const head = `${rewritten} of ${plural(total, "reply", "replies")} rewritten`;
  if (state === "running") return `${head}…`;
  if (state === "cancelled") return `${head}; the rest was cancelled.`;
  return failed ? `${head}; ${failed} failed (resume to retry).` : `${head}.`;
}

// Polls the deletion while its rewrites run; `onProgress(deletion)` on each change, then once at the end.
export function followRewrites(deletionId, { onProgress, intervalMs = 700 }) {
  let stopped = false;
  let last = "";
  async function tick() {
    if (stopped) return;
    try {
      const deletion = await api.deletion(deletionId);
      const key = JSON.stringify(deletion.regeneration);
      if (key !== last) {
        last = key;
        onProgress(deletion);
      }
      if (deletion.regeneration?.state !== "running") return;
    } catch {
      // A lost connection: keep trying at the same pace.
    }
    setTimeout(tick, intervalMs);
  }
  tick();
  return {
    stop() {
      stopped = true;
    },
  };
}

// What an undo would do, as one sentence ("restores 4 messages and removes 3 rewritten").
export async function undoSummary(deletionId) {
  const plan = await api.undoPreview(deletionId);
  const removes = plan.removes.length ? ` and removes ${plural(plan.removes.length, "rewritten message")}` : "";
  return `Undo restores ${plural(plan.restores.length, "message")}${removes}.`;
}
