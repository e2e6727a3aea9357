// `/?deletion=<id>` opens that deletion's card: the link another client (the
// OpenAI-compatible endpoint, /v1) answers a typed deletion request with.
// A deletion that is no longer a preview says what became of it instead.
import { api } from "../api.js";
import { toast } from "../dom.js";
import { forgetCard } from "./composer.js";
import { updateEmpty } from "./messages.js";
import { page, state } from "./state.js";

export async function openDeletion(id) {
  const url = new URL(location.href);
  url.searchParams.delete("deletion");
  history.replaceState(null, "", url);
  const deletion = await api.deletion(id);
  if (deletion.status !== "previewed") {
    toast(`This deletion request is already ${deletion.status.replace("_", " ")}.`);
    return;
  }
  const card = forgetCard(deletion, state.thread);
  page.messageList.append(card);
  updateEmpty();
  card.scrollIntoView({ block: "center" });
}
