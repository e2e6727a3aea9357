// Replies being written: the pending bubble that streams tokens in, the
// failed bubble with Retry, and turns resumed after a reload.
import { api } from "../api.js";
import { el, toast } from "../dom.js";
import { roleLabel } from "../model.js";
import { followTurn } from "../turn-stream.js";
import { messageItem, scrollToEnd } from "./messages.js";
import { state } from "./state.js";

const STATUS_TEXT = {
  pending: "Waiting for a worker…",
  running: "Recalling memories and writing…",
  unreachable: "Connection lost; still trying…",
};

// Turns still running (or failed) survive a reload: their ids are kept in
// sessionStorage per thread, ids only.
export const openTurns = {
  key: (threadId) => `dellm.turns.${threadId}`,
  list(threadId) {
    try {
      return JSON.parse(sessionStorage.getItem(this.key(threadId))) || [];
    } catch {
      return [];
    }
  },
  save(threadId, turns) {
    sessionStorage.setItem(this.key(threadId), JSON.stringify(turns));
  },
  add(threadId, turn, message) {
    this.save(threadId, [...this.list(threadId).filter((t) => t.turn !== turn), { turn, message }]);
  },
  remove(threadId, turn) {
    this.save(threadId, this.list(threadId).filter((t) => t.turn !== turn));
  },
};

const author = () => el("span", { class: "msg-author" }, roleLabel("assistant", { byline: true }));

export function pendingItem(turnId, status) {
  return el(
    "li",
    { class: "msg msg-assistant msg-pending", dataset: { turn: turnId }, "aria-busy": "true" },
    el("div", { class: "msg-meta" }, author()),
    el("div", { class: "msg-body" }, el("span", { class: "typing", "aria-hidden": "true" }, el("i"), el("i"), el("i")), el("span", { class: "stream" })),
    el("div", { class: "turn-status", role: "status" }, STATUS_TEXT[status] || STATUS_TEXT.pending),
  );
}

function failedItem(turn, threadId) {
  const retry = el("button", { type: "button", class: "btn btn-small btn-primary", dataset: { retry: turn.id } }, "Retry");
  const item = el(
    "li",
    { class: "msg msg-assistant msg-failed", dataset: { turn: turn.id } },
    el("div", { class: "msg-meta" }, author(), el("span", { class: "badge badge-failed" }, "no reply")),
    el("div", { class: "msg-body" }, el("strong", {}, "The reply failed. "), turn.error || "The turn failed."),
    el("div", { class: "turn-actions" }, retry),
  );
  retry.addEventListener("click", async () => {
    retry.disabled = true;
    try {
      const again = await api.retry(turn.id);
      const pending = pendingItem(turn.id, again.status);
      item.replaceWith(pending);
      track(turn.id, pending, threadId, turn.message);
    } catch (error) {
      retry.disabled = false;
      toast(error.message, { kind: "error" });
    }
  });
  return item;
}

// Streams the turn into its pending `item`, then swaps in the reply (or the
// failure); `questionId` is the user message it answers; `afterDone()` runs
// once the reply is in.
export function track(turnId, item, threadId, questionId, afterDone = () => {}) {
  const body = item.querySelector(".stream");
  const status = item.querySelector(".turn-status");
  const follow = followTurn(turnId, {
    onStatus(value) {
      status.textContent = STATUS_TEXT[value] || value;
    },
    onToken(text) {
      item.classList.add("msg-streaming");
      status.textContent = "Writing…";
      body.append(text);
      scrollToEnd();
    },
    onReset() {
      body.textContent = "";
      status.textContent = "Memory changed; rebuilding the context…";
    },
    onDone(turn) {
      state.follows.delete(turnId);
      openTurns.remove(threadId, turnId);
      if (state.thread?.id !== threadId) return;
      state.known.set(turn.reply.id, turn.reply);
      const reply = messageItem(turn.reply, questionId ?? turn.message);
      reply.classList.add("msg-arrived");
      item.replaceWith(reply);
      scrollToEnd();
      afterDone();
    },
    onFailed(turn) {
      state.follows.delete(turnId);
      if (state.thread?.id !== threadId) return;
      item.replaceWith(failedItem(turn, threadId));
      scrollToEnd();
    },
  });
  state.follows.set(turnId, follow);
}

export function stopFollowing() {
  for (const follow of state.follows.values()) follow.stop();
  state.follows.clear();
}

// Puts back the bubbles of this thread's turns that were open before a reload.
export async function resumeTurns(threadId) {
  for (const { turn: turnId, message } of openTurns.list(threadId)) {
    let turn;
    try {
      turn = await api.turn(turnId);
    } catch {
      openTurns.remove(threadId, turnId);
      continue;
    }
    const anchor = document.getElementById(`m-${message}`);
    if (turn.status === "done" || !anchor) {
      openTurns.remove(threadId, turnId);
      continue;
    }
    const item = turn.status === "failed" ? failedItem(turn, threadId) : pendingItem(turnId, turn.status);
    anchor.after(item);
    if (turn.status !== "failed") track(turnId, item, threadId, message);
  }
}
