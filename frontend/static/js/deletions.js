// The deletion history page: ids, counts and outcomes, never deleted text.
import { api } from "./api.js";
import { el, plural, replaceChildren, timeEl, toast } from "./dom.js";
import { agentReadsNote } from "./agent-reads.js";
import { progressText, undoSummary } from "./rewrites.js";
import { confirmDialog, modeLabel } from "./ui.js";

const host = document.querySelector("[data-deletions]");
const showAll = document.querySelector("[data-show-all]");
const agentConfirm = document.querySelector("[data-agent-confirm]");
let deletions = [];

const EXECUTED = new Set(["executed", "verification_failed"]);
const SELECTOR_TEXT = { ids: "chosen messages", exact: "exact phrase", semantic: "by meaning", request: "asked in chat" };
const STATUS_TEXT = {
  previewed: "preview only",
  scheduled: "scheduled",
  executed: "done",
  verification_failed: "done, check failed",
  cancelled: "cancelled",
  undone: "undone",
};

function actions(deletion) {
  const cell = el("div", { class: "row-actions" });
  if (EXECUTED.has(deletion.status) && deletion.mode === "soft") {
    cell.append(
      button("Undo", "btn-primary", async () => {
        const rewrites = deletion.regeneration || Object.keys(deletion.redacted || {}).length;
        const text = rewrites ? await undoSummary(deletion.id) : `Restores the ${plural(deletion.deleted.length, "message")} it removed.`;
        run(deletion, "undo", "Undo this deletion?", text);
      }),
    );
  }
  const rewriting = EXECUTED.has(deletion.status) ? deletion.regeneration?.state : null;
  if (rewriting === "running") cell.append(button("Stop rewriting", "btn-quiet", () => run(deletion, "cancel", "Stop rewriting?", "Replies not rewritten yet stay deleted; you can resume later.")));
  if (rewriting === "failed" || rewriting === "cancelled") {
    cell.append(button("Resume rewriting", "btn-quiet", () => run(deletion, "resume", "Resume rewriting?", "The replies not rewritten yet are written again, one model call each.")));
  }
  if (deletion.status === "scheduled" || deletion.status === "previewed") {
    cell.append(
      button(deletion.status === "scheduled" ? "Cancel expiry" : "Discard", "btn-quiet", () =>
        run(deletion, "cancel", "Cancel this deletion?", "Nothing will be deleted by it."),
      ),
    );
  }
  return cell;
}

function button(label, kind, onclick) {
  return el("button", { type: "button", class: `btn btn-small ${kind}`, onclick }, label);
}

async function run(deletion, verb, title, text) {
  const labels = { undo: "Undo", cancel: "Cancel it", resume: "Resume" };
  if (!(await confirmDialog({ title, body: el("p", {}, text), confirmLabel: labels[verb] }))) return;
  try {
    const calls = { undo: api.undoDeletion, cancel: api.cancelDeletion, resume: api.resumeDeletion };
    const updated = await calls[verb](deletion.id);
    deletions = deletions.map((item) => (item.id === updated.id ? updated : item));
    render();
    const done = { undo: `Restored ${plural(updated.deleted.length, "message")}.`, cancel: "Cancelled.", resume: "Rewriting again." };
    toast(done[verb], { kind: "success" });
  } catch (error) {
    toast(error.message, { kind: "error" });
  }
}

function counts(deletion) {
  const removed = EXECUTED.has(deletion.status) || deletion.status === "undone";
  return el(
    "div",
    { class: "counts" },
    el("span", {}, el("strong", {}, deletion.matched.length), " matched"),
    el("span", {}, el("strong", {}, deletion.dependents.length), " derived"),
    removed ? el("span", {}, el("strong", {}, deletion.deleted.length), deletion.status === "undone" ? " restored" : " removed") : null,
  );
}

// The receipt: checks run right after the deletion (I1, ids gone, forget test, purge residue).
// They run after the confirmation returns: until the receipt is written the row says so, and the
// page asks again (`refreshVerifying`).
function receipt(deletion) {
  if (deletion.verifying) return el("div", { class: "muted small", dataset: { receipt: "verifying" } }, "verifying…");
  if (!deletion.receipt) return null;
  if (deletion.receipt.passed) return el("div", { class: "muted small", dataset: { receipt: "passed" } }, "✓ verified");
  return el(
    "div",
    { class: "small error-text", dataset: { receipt: "failed" } },
    "Verification failed: ",
    deletion.receipt.failed.join(", "),
    ". An administrator has been alerted.",
  );
}

function row(deletion) {
  return el(
    "tr",
    { dataset: { deletion: deletion.id, status: deletion.status } },
    el("td", { "data-label": "When" }, timeEl(deletion.created_at)),
    el("td", { "data-label": "Mode" }, el("span", { class: `badge badge-mode-${deletion.mode}` }, modeLabel(deletion.mode)), el("div", { class: "muted small" }, SELECTOR_TEXT[deletion.selector] || deletion.selector)),
    el("td", { "data-label": "Messages" }, counts(deletion)),
    el(
      "td",
      { "data-label": "Status" },
      el("span", { class: `badge badge-${deletion.status}` }, STATUS_TEXT[deletion.status] || deletion.status),
      deletion.status === "scheduled" && deletion.expire_at ? el("div", { class: "muted small" }, "at ", timeEl(deletion.expire_at)) : null,
      receipt(deletion),
      agentReadsNote(deletion.agent_reads, { tag: "div" }),
    ),
    el(
      "td",
      { "data-label": "Outcome", class: "outcome" },
      // A scheduled one's time is shown, in local time, under its status; the outcome text has it in UTC.
      deletion.status === "scheduled" ? "Scheduled." : deletion.outcome || "—",
      // Once undone, its rewrites are gone with it (the outcome counts them).
      deletion.regeneration && deletion.status !== "undone"
        ? el("div", { class: "rewrite-progress small" }, progressText(deletion.regeneration))
        : null,
    ),
    el("td", { "data-label": "" }, actions(deletion)),
  );
}

const VERIFY_POLL_MS = 1000;
let verifyTimer = null;

// Re-reads the deletions still being verified, once a second, until each has its receipt.
function refreshVerifying() {
  clearTimeout(verifyTimer);
  const pending = deletions.filter((item) => item.verifying);
  if (!pending.length) return;
  verifyTimer = setTimeout(async () => {
    try {
      const fresh = await Promise.all(pending.map((item) => api.deletion(item.id)));
      const byId = new Map(fresh.map((item) => [item.id, item]));
      deletions = deletions.map((item) => byId.get(item.id) || item);
      render();
    } catch (error) {
      toast(error.message, { kind: "error" });
    }
  }, VERIFY_POLL_MS);
}

function render() {
  refreshVerifying();
  const shown = showAll.checked ? deletions : deletions.filter((item) => item.status !== "previewed" && item.status !== "cancelled");
  host.setAttribute("aria-busy", "false");
  if (!shown.length) {
    replaceChildren(
      host,
      el(
        "div",
        { class: "empty-state" },
        el("h2", {}, "Nothing deleted yet"),
        el("p", {}, "Ask in the chat (“forget that …”) or use Preview delete on the memory graph."),
      ),
    );
    return;
  }
  replaceChildren(
    host,
    el(
      "table",
      { class: "history" },
      el("caption", { class: "visually-hidden" }, "Your deletions, newest first"),
      el("thead", {}, el("tr", {}, ["When", "Mode", "Messages", "Status", "Outcome", "Actions"].map((name) => el("th", { scope: "col" }, name)))),
      el("tbody", {}, shown.map(row)),
    ),
  );
}

showAll.addEventListener("change", render);
api.agentAccess().then((access) => {
  agentConfirm.checked = access.may_confirm_deletions;
  agentConfirm.disabled = false;
});
agentConfirm.addEventListener("change", () => {
  agentConfirm.disabled = true;
  api
    .setAgentAccess({ may_confirm_deletions: agentConfirm.checked })
    .then((access) => {
      agentConfirm.checked = access.may_confirm_deletions;
      toast(access.may_confirm_deletions ? "Agents may now confirm deletions." : "Only you confirm deletions now.");
    })
    .catch((error) => {
      agentConfirm.checked = !agentConfirm.checked;
      toast(error.message);
    })
    .finally(() => {
      agentConfirm.disabled = false;
    });
});
api
  .deletions()
  .then((list) => {
    deletions = list;
    render();
  })
  .catch((error) => {
    host.setAttribute("aria-busy", "false");
    replaceChildren(host, el("p", { class: "error-text" }, error.message));
  });
