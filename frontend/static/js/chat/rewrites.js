// Rewrites landing in the open conversation: a reply being rewritten takes
// the old one's place as a bubble that streams like any reply (turns.js); a
// redacted message is swapped for its replacement where it stood.
import { api } from "../api.js";
import { toast } from "../dom.js";
import { messageItem } from "./messages.js";
import { state } from "./state.js";
import { pendingItem, track } from "./turns.js";

// Synchronous swaps first (the caller removes the other deleted messages right after).
export function rewriteInPlace(done) {
  const threadId = state.thread?.id;
  for (const [original, replacement] of Object.entries(done.redacted || {})) {
    const old = document.getElementById(`m-${original}`);
    if (!old) continue;
    state.known.delete(Number(original));
    const placeholder = pendingItem(`redaction-${replacement}`, "pending");
    placeholder.classList.replace("msg-assistant", "msg-user");
    old.replaceWith(placeholder);
    api
      .message(replacement)
      .then((message) => {
        state.known.set(message.id, message);
        const item = messageItem(message);
        item.classList.add("msg-arrived");
        placeholder.replaceWith(item);
      })
      .catch((error) => toast(error.message, { kind: "error" }));
  }
  for (const turn of done.regeneration?.turns || []) {
    const old = document.getElementById(`m-${turn.replaces}`);
    if (!old) continue;
    state.known.delete(turn.replaces);
    const pending = pendingItem(turn.id, turn.status === "done" ? "running" : turn.status);
    pending.classList.add("msg-rewriting");
    pending.querySelector(".turn-status").textContent = "Rewriting without what you asked to forget…";
    old.replaceWith(pending);
    track(turn.id, pending, threadId, turn.message);
  }
}
