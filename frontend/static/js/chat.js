// The chat page: threads, the conversation, the composer; replies stream in.
import { api, messagesById } from "./api.js";
import { deletionCard } from "./deletion-card.js";
import { el, formatWhen, plural, replaceChildren, snippet, timeEl, toast } from "./dom.js";
import { followTurn } from "./turn-stream.js";

const root = document.querySelector("[data-chat]");
const graphUrl = root.dataset.graphUrl;
const deletionsUrl = root.dataset.deletionsUrl;
const threadList = root.querySelector("[data-thread-list]");
const messageList = root.querySelector("[data-messages]");
const scroller = root.querySelector("[data-scroll]");
const emptyState = root.querySelector("[data-empty]");
const titleEl = root.querySelector("[data-thread-title]");
const renameButton = root.querySelector("[data-rename]");
const renameForm = root.querySelector("[data-rename-form]");
const renameInput = renameForm.querySelector("input");
const composer = root.querySelector("[data-composer]");
const input = composer.querySelector("textarea");
const sendButton = composer.querySelector("[data-send]");
const threadsPanel = root.querySelector("[data-threads-panel]");
const threadsToggle = root.querySelector("[data-threads-toggle]");

const state = {
  threads: [],
  thread: null,
  // id -> Message, for the seq numbers and snippets of "used memory" chips.
  known: new Map(),
  follows: new Map(),
};

// Turns still running (or failed) survive a reload: their ids are kept in
// sessionStorage per thread, ids only.
const openTurns = {
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

function threadTitle(thread) {
  return thread.title || `Untitled · ${formatWhen(thread.created_at)}`;
}

function nearBottom() {
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
}

function scrollToEnd(force = false) {
  if (force || nearBottom()) scroller.scrollTop = scroller.scrollHeight;
}

/* Threads ---------------------------------------------------------------- */

function renderThreads() {
  replaceChildren(
    threadList,
    state.threads.map((thread) =>
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "thread-item",
            "aria-current": state.thread?.id === thread.id ? "true" : undefined,
            dataset: { thread: thread.id },
            onclick: () => openThread(thread.id),
          },
          el("span", { class: "thread-name" }, threadTitle(thread)),
          el("span", { class: "thread-when" }, formatWhen(thread.updated_at)),
        ),
      ),
    ),
  );
  if (!state.threads.length) {
    threadList.append(el("li", { class: "muted thread-none" }, "No threads yet."));
  }
}

async function loadThreads() {
  state.threads = await api.threads();
  renderThreads();
}

async function newThread() {
  const thread = await api.createThread();
  state.threads.unshift(thread);
  await openThread(thread.id);
  input.focus();
  return thread;
}

async function openThread(id) {
  for (const follow of state.follows.values()) follow.stop();
  state.follows.clear();
  const thread = await api.thread(id);
  state.thread = thread;
  const url = new URL(location.href);
  url.searchParams.set("thread", id);
  history.replaceState(null, "", url);
  titleEl.textContent = threadTitle(thread);
  renameButton.hidden = false;
  threadsPanel.classList.remove("open");
  threadsToggle.setAttribute("aria-expanded", "false");
  for (const message of thread.messages) state.known.set(message.id, message);
  renderThreads();
  renderConversation(thread.messages);
  await resumeTurns(thread.id);
  scrollToEnd(true);
}

function startRename() {
  renameForm.hidden = false;
  renameButton.hidden = true;
  titleEl.hidden = true;
  renameInput.value = state.thread.title;
  renameInput.focus();
  renameInput.select();
}

function endRename() {
  renameForm.hidden = true;
  renameButton.hidden = false;
  titleEl.hidden = false;
  renameButton.focus();
}

/* Messages ---------------------------------------------------------------- */

// The user message a reply answers: the latest user message before it that
// is in its context (always there: the context includes the question).
function answeredId(reply, before) {
  const context = new Set(reply.context);
  for (let index = before.length - 1; index >= 0; index -= 1) {
    const message = before[index];
    if (message.role === "user" && context.has(message.id)) return message.id;
  }
  return null;
}

function memoryChips(reply, questionId) {
  const used = reply.context.filter((id) => id !== questionId);
  const row = el("div", { class: "chips", dataset: { chipsFor: reply.id } });
  if (!used.length) {
    row.append(el("span", { class: "chips-label" }, "No memory used"));
    return row;
  }
  row.append(el("span", { class: "chips-label" }, "Used memory:"));
  const chips = used.map((id) =>
    el("a", { class: "chip", href: `${graphUrl}?focus=${id}`, dataset: { id }, title: "Open in the memory graph" }, "#…"),
  );
  row.append(...chips);
  const fill = () => {
    for (const chip of chips) {
      const message = state.known.get(Number(chip.dataset.id));
      if (!message) continue;
      chip.textContent = `#${message.seq}`;
      chip.title = `${message.role === "user" ? "You" : "DeLLM"}: ${snippet(message.content, 100)} (open in the memory graph)`;
    }
  };
  const missing = used.filter((id) => !state.known.has(id));
  if (missing.length) {
    messagesById(missing)
      .then((found) => {
        for (const [id, message] of found) if (message) state.known.set(id, message);
        fill();
      })
      .catch(() => {});
  }
  fill();
  return row;
}

function messageItem(message, questionId = null) {
  const mine = message.role === "user";
  const item = el(
    "li",
    { class: `msg ${mine ? "msg-user" : "msg-assistant"}`, id: `m-${message.id}`, dataset: { id: message.id, seq: message.seq } },
    el(
      "div",
      { class: "msg-meta" },
      el("span", { class: "msg-author" }, mine ? "You" : "DeLLM"),
      el("a", { class: "msg-seq", href: `${graphUrl}?focus=${message.id}`, title: "Open in the memory graph" }, `#${message.seq}`),
      timeEl(message.created_at),
      message.status === "expiring" ? el("span", { class: "badge badge-scheduled" }, "expiring") : null,
    ),
    el("div", { class: "msg-body" }, message.content),
  );
  if (!mine) item.append(memoryChips(message, questionId));
  return item;
}

function renderConversation(messages) {
  const items = messages.map((message, index) =>
    messageItem(message, message.role === "user" ? null : answeredId(message, messages.slice(0, index))),
  );
  replaceChildren(messageList, items);
  updateEmpty();
}

function updateEmpty() {
  emptyState.hidden = messageList.children.length > 0;
}

function removeMessages(ids) {
  for (const id of ids) {
    state.known.delete(id);
    const item = document.getElementById(`m-${id}`);
    if (!item) continue;
    item.classList.add("msg-leaving");
    item.addEventListener("animationend", () => {
      item.remove();
      updateEmpty();
    });
  }
}

/* Turns -------------------------------------------------------------------- */

const STATUS_TEXT = {
  pending: "Waiting for a worker…",
  running: "Recalling memories and writing…",
  unreachable: "Connection lost; still trying…",
};

function pendingItem(turnId, status) {
  return el(
    "li",
    { class: "msg msg-assistant msg-pending", dataset: { turn: turnId }, "aria-busy": "true" },
    el("div", { class: "msg-meta" }, el("span", { class: "msg-author" }, "DeLLM")),
    el("div", { class: "msg-body" }, el("span", { class: "typing", "aria-hidden": "true" }, el("i"), el("i"), el("i")), el("span", { class: "stream" })),
    el("div", { class: "turn-status", role: "status" }, STATUS_TEXT[status] || STATUS_TEXT.pending),
  );
}

function failedItem(turn, threadId) {
  const retry = el("button", { type: "button", class: "btn btn-small btn-primary", dataset: { retry: turn.id } }, "Retry");
  const item = el(
    "li",
    { class: "msg msg-assistant msg-failed", dataset: { turn: turn.id } },
    el("div", { class: "msg-meta" }, el("span", { class: "msg-author" }, "DeLLM"), el("span", { class: "badge badge-failed" }, "no reply")),
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

function track(turnId, item, threadId, questionId) {
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

async function resumeTurns(threadId) {
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

/* Composer ----------------------------------------------------------------- */

function autosize() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 220)}px`;
}

async function send(event) {
  event.preventDefault();
  const content = input.value;
  if (!content.trim()) {
    input.focus();
    return;
  }
  sendButton.disabled = true;
  try {
    const thread = state.thread || (await newThread());
    const answer = await api.send(thread.id, content);
    input.value = "";
    autosize();
    if (answer.deletion) {
      messageList.append(
        deletionCard(answer.deletion, {
          deletionsUrl,
          onDeleted: (done, ids) => {
            removeMessages(ids);
            if (ids.length) toast(`${plural(ids.length, "message")} forgotten.`, { kind: "success" });
          },
          onUndone: () => openThread(thread.id),
        }),
      );
    } else {
      state.known.set(answer.message.id, answer.message);
      messageList.append(messageItem(answer.message));
      const pending = pendingItem(answer.turn.id, answer.turn.status);
      messageList.append(pending);
      openTurns.add(thread.id, answer.turn.id, answer.message.id);
      track(answer.turn.id, pending, thread.id, answer.message.id);
      bumpThread(thread.id);
    }
    updateEmpty();
    scrollToEnd(true);
  } catch (error) {
    toast(error.message, { kind: "error" });
  } finally {
    sendButton.disabled = false;
    input.focus();
  }
}

function bumpThread(id) {
  const index = state.threads.findIndex((thread) => thread.id === id);
  if (index > 0) {
    state.threads.unshift(...state.threads.splice(index, 1));
    renderThreads();
  }
}

/* Wiring ------------------------------------------------------------------- */

composer.addEventListener("submit", send);
input.addEventListener("input", autosize);
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});
root.querySelector("[data-new-thread]").addEventListener("click", () => newThread().catch((error) => toast(error.message, { kind: "error" })));
renameButton.addEventListener("click", startRename);
root.querySelector("[data-rename-cancel]").addEventListener("click", endRename);
renameForm.addEventListener("keydown", (event) => {
  if (event.key === "Escape") endRename();
});
renameForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const thread = await api.renameThread(state.thread.id, renameInput.value.trim());
    state.thread.title = thread.title;
    state.threads = state.threads.map((item) => (item.id === thread.id ? thread : item));
    titleEl.textContent = threadTitle(thread);
    renderThreads();
    endRename();
  } catch (error) {
    toast(error.message, { kind: "error" });
  }
});
threadsToggle.addEventListener("click", () => {
  const open = threadsPanel.classList.toggle("open");
  threadsToggle.setAttribute("aria-expanded", String(open));
});

async function start() {
  await loadThreads();
  const wanted = Number(new URLSearchParams(location.search).get("thread"));
  const first = state.threads.find((thread) => thread.id === wanted) || state.threads[0];
  if (first) {
    await openThread(first.id);
    // "Open in chat" from the graph links to #m-<id>; the message exists only now.
    if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView({ block: "center" });
  } else {
    titleEl.textContent = "New conversation";
    updateEmpty();
  }
  input.focus();
}

start().catch((error) => toast(error.message, { kind: "error" }));
