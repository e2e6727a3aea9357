// The chat page: threads, the conversation, the composer; replies stream in.
// One module per concern under chat/:
//   state.js         the page's elements and shared state
//   threads.js       thread list, open, new, rename, earlier pages of a long thread
//   messages.js      message items, the conversation, scrolling, removal
//   memory-chips.js  the "Used memory" chips under a reply
//   turns.js         pending / failed replies, streaming, resume after reload
//   composer.js      sending; a forget request becomes a deletion card
//   deletion-link.js /?deletion=<id> opens that deletion's card
import { toast } from "./dom.js";
import { wireComposer } from "./chat/composer.js";
import { openDeletion } from "./chat/deletion-link.js";
import { updateEmpty } from "./chat/messages.js";
import { page, state } from "./chat/state.js";
import { loadThreads, openThread, revealMessage, wireThreads } from "./chat/threads.js";

async function start() {
  await loadThreads();
  const params = new URLSearchParams(location.search);
  const wanted = Number(params.get("thread"));
  const first = state.threads.find((thread) => thread.id === wanted) || state.threads[0];
  if (first) {
    await openThread(first.id);
    // "Open in chat" from the graph links to #m-<id>; the message exists only now, perhaps a few pages back.
    const linked = /^#m-(\d+)$/.exec(location.hash);
    if (linked) (await revealMessage(Number(linked[1])))?.scrollIntoView({ block: "center", behavior: "instant" });
  } else {
    page.title.textContent = "New conversation";
    updateEmpty();
  }
  const deletionId = Number(params.get("deletion"));
  if (deletionId) await openDeletion(deletionId);
  page.input.focus();
}

wireComposer();
wireThreads();
start().catch((error) => toast(error.message, { kind: "error" }));
