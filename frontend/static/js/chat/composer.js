// The composer: Enter sends, Shift+Enter adds a line. A message starts a
// turn (its reply streams in, turns.js); a forget request comes back as a
// deletion card (deletion-card.js) instead.
import { api } from "../api.js";
import { deletionCard } from "../deletion-card.js";
import { plural, toast } from "../dom.js";
import { watchExpiry } from "./expiry.js";
import { messageItem, removeMessages, scrollToEnd, updateEmpty } from "./messages.js";
import { rewriteInPlace } from "./rewrites.js";
import { page, state } from "./state.js";
import { bumpThread, followTitle, newThread, openThread } from "./threads.js";
import { openTurns, pendingItem, track } from "./turns.js";

const MAX_HEIGHT = 220;

function autosize() {
  page.input.style.height = "auto";
  page.input.style.height = `${Math.min(page.input.scrollHeight, MAX_HEIGHT)}px`;
}

// `thread` is where Undo reopens; a card opened from a link has none of its own.
export function forgetCard(deletion, thread) {
  const card = deletionCard(deletion, {
    deletionsUrl: page.deletionsUrl,
    onDeleted: (done, ids) => {
      // A scheduled expiry takes its messages off the page when it has fired.
      if (done.status === "scheduled") watchExpiry({ expiry: { deletion: done.id, at: done.expire_at } }, removeMessages);
      // Rewrites take their originals' places before the rest leaves.
      rewriteInPlace(done);
      removeMessages(ids);
      if (ids.length) toast(`${plural(ids.length, "message")} forgotten.`, { kind: "success" });
    },
    onUndone: () => thread && reopenWithCard(thread.id, card),
  });
  return card;
}

// Reopening the thread shows the restored messages, but it redraws the whole
// conversation, and the card lives in it: put the card back after them, or
// its "Restored" would vanish as soon as the thread came back (the card is
// the only place that says the undo happened, with its history link).
async function reopenWithCard(threadId, card) {
  await openThread(threadId);
  if (state.thread?.id !== threadId) return;
  page.messageList.append(card);
  updateEmpty();
  scrollToEnd(true);
}

function startTurn(answer, thread) {
  state.known.set(answer.message.id, answer.message);
  page.messageList.append(messageItem(answer.message));
  const pending = pendingItem(answer.turn.id, answer.turn.status);
  page.messageList.append(pending);
  openTurns.add(thread.id, answer.turn.id, answer.message.id);
  track(answer.turn.id, pending, thread.id, answer.message.id, () => followTitle(thread.id));
  bumpThread(thread.id);
}

async function send(event) {
  event.preventDefault();
  const { input, sendButton } = page;
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
    if (answer.deletion) page.messageList.append(forgetCard(answer.deletion, thread));
    else startTurn(answer, thread);
    updateEmpty();
    scrollToEnd(true);
  } catch (error) {
    toast(error.message, { kind: "error" });
  } finally {
    sendButton.disabled = false;
    input.focus();
  }
}

export function wireComposer() {
  page.composer.addEventListener("submit", send);
  page.input.addEventListener("input", autosize);
  page.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      page.composer.requestSubmit();
    }
  });
}
