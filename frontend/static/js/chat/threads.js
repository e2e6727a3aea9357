// The thread list (left), opening a thread, creating one, and renaming it.
import { api } from "../api.js";
import { el, formatWhen, replaceChildren, toast } from "../dom.js";
import { threadTitle } from "../model.js";
import { prependConversation, renderConversation } from "./messages.js";
import { page, root, state } from "./state.js";
import { resumeTurns, stopFollowing } from "./turns.js";

function renderThreads() {
  replaceChildren(
    page.threadList,
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
    page.threadList.append(el("li", { class: "muted thread-none" }, "No threads yet."));
  }
}

export async function loadThreads() {
  state.threads = await api.threads();
  renderThreads();
}

export async function newThread() {
  const thread = await api.createThread();
  state.threads.unshift(thread);
  await openThread(thread.id);
  page.input.focus();
  return thread;
}

export async function openThread(id) {
  stopFollowing();
  const thread = await api.thread(id);
  state.thread = thread;
  const url = new URL(location.href);
  url.searchParams.set("thread", id);
  history.replaceState(null, "", url);
  page.title.textContent = threadTitle(thread);
  page.renameButton.hidden = false;
  threadsOpen(false);
  for (const message of thread.messages) state.known.set(message.id, message);
  renderThreads();
  renderConversation(thread.messages);
  showOlder(thread.messages_next);
  await resumeTurns(thread.id);
  // At once, not smoothly: passing the top on the way would load earlier pages.
  page.scroller.scrollTo({ top: page.scroller.scrollHeight, behavior: "instant" });
}

/* Earlier messages: a long thread opens on its newest page ------------------ */

function showOlder(url) {
  state.olderUrl = url;
  page.loadEarlier.hidden = !url;
}

// Loads the page before the oldest message shown (one load at a time).
export function loadEarlier() {
  if (!state.olderUrl) return Promise.resolve();
  if (state.loadingOlder) return state.loadingOlder;
  const threadId = state.thread.id;
  page.loadEarlier.disabled = true;
  state.loadingOlder = api
    .threadMessages(state.olderUrl)
    .then(({ items, next }) => {
      if (state.thread?.id !== threadId) return;
      const older = items.reverse();
      for (const message of older) state.known.set(message.id, message);
      prependConversation(older);
      showOlder(next);
    })
    .finally(() => {
      state.loadingOlder = null;
      page.loadEarlier.disabled = false;
    });
  return state.loadingOlder;
}

// Loads earlier pages until message `id` is shown or the thread's start is reached (a link to #m-<id>).
export async function revealMessage(id) {
  while (!document.getElementById(`m-${id}`) && state.olderUrl) await loadEarlier();
  return document.getElementById(`m-${id}`);
}

// Moves a thread that just got a message to the top of the list.
export function bumpThread(id) {
  const index = state.threads.findIndex((thread) => thread.id === id);
  if (index > 0) {
    state.threads.unshift(...state.threads.splice(index, 1));
    renderThreads();
  }
}

/* A drawn title ------------------------------------------------------------ */

// The worker names an untitled thread from its first exchange just after the
// reply: the list and the header follow it, asking a few times, then not again.
const TITLE_TRIES = 6;
const TITLE_WAIT_MS = 500;

export async function followTitle(id) {
  for (let attempt = 0; attempt < TITLE_TRIES; attempt += 1) {
    if (state.threads.find((thread) => thread.id === id)?.title) return;
    await new Promise((resolve) => setTimeout(resolve, TITLE_WAIT_MS));
    const fresh = await api.thread(id).catch(() => null);
    if (!fresh?.title) continue;
    state.threads = state.threads.map((thread) => (thread.id === id ? { ...thread, title: fresh.title } : thread));
    if (state.thread?.id === id) {
      state.thread.title = fresh.title;
      page.title.textContent = threadTitle(fresh);
    }
    renderThreads();
    return;
  }
}

/* Rename ------------------------------------------------------------------- */

function startRename() {
  page.renameForm.hidden = false;
  page.renameButton.hidden = true;
  page.title.hidden = true;
  page.renameInput.value = state.thread.title;
  page.renameInput.focus();
  page.renameInput.select();
}

function endRename() {
  page.renameForm.hidden = true;
  page.renameButton.hidden = false;
  page.title.hidden = false;
  page.renameButton.focus();
}

async function saveRename(event) {
  event.preventDefault();
  try {
    const thread = await api.renameThread(state.thread.id, page.renameInput.value.trim());
    state.thread.title = thread.title;
    state.threads = state.threads.map((item) => (item.id === thread.id ? thread : item));
    page.title.textContent = threadTitle(thread);
    renderThreads();
    endRename();
  } catch (error) {
    toast(error.message, { kind: "error" });
  }
}

export function wireThreads() {
  root.querySelector("[data-new-thread]").addEventListener("click", () => newThread().catch((error) => toast(error.message, { kind: "error" })));
  page.renameButton.addEventListener("click", startRename);
  root.querySelector("[data-rename-cancel]").addEventListener("click", endRename);
  page.renameForm.addEventListener("keydown", (event) => {
    if (event.key === "Escape") endRename();
  });
  page.renameForm.addEventListener("submit", saveRename);
  const earlier = () => loadEarlier().catch((error) => toast(error.message, { kind: "error" }));
  page.loadEarlier.addEventListener("click", earlier);
  page.scroller.addEventListener("scroll", () => {
    if (page.scroller.scrollTop < 200 && state.olderUrl) earlier();
  });
  page.threadsToggle.addEventListener("click", () => threadsOpen(!page.threadsPanel.classList.contains("open")));
  // On a phone the list is a drawer over the conversation: Escape or a tap beside it closes it too.
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && page.threadsPanel.classList.contains("open")) {
      threadsOpen(false);
      page.threadsToggle.focus();
    }
  });
  document.addEventListener("pointerdown", (event) => {
    const inside = page.threadsPanel.contains(event.target) || page.threadsToggle.contains(event.target);
    if (!inside && page.threadsPanel.classList.contains("open")) threadsOpen(false);
  });
}

function threadsOpen(open) {
  page.threadsPanel.classList.toggle("open", open);
  page.threadsToggle.setAttribute("aria-expanded", String(open));
}
