// Expiring messages leave the open conversation when their scheduled deletion
// fires, as a deletion confirmed here does: once its time has come, the
// deletion is read until it has run (a worker runs a due expiry within about
// 30 s), and what it removed (Dep recomputed then: replies built from the
// message too) goes from the page.
import { api } from "../api.js";

const RECHECK_MS = 10_000;
// A deletion still scheduled this long after its time is left to the next visit.
const GIVE_UP_MS = 10 * 60_000;
// setTimeout's longest delay (about 24.8 days); a later expiry is re-armed.
const LONGEST_DELAY_MS = 2 ** 31 - 1;

const watched = new Set(); // ids of the scheduled deletions being watched

// Watches the expiry a message shows (`message.expiry`, docs/API.md), once per
// deletion; `remove(ids)` takes what it removed off the page.
export function watchExpiry(message, remove) {
  const expiry = message.expiry;
  if (!expiry || watched.has(expiry.deletion)) return;
  watched.add(expiry.deletion);
  wait(expiry.deletion, new Date(expiry.at).getTime(), remove);
}

function wait(id, due, remove) {
  const delay = Math.max(due - Date.now(), 0) + 1000;
  setTimeout(() => check(id, due, remove), Math.min(delay, LONGEST_DELAY_MS));
}

async function check(id, due, remove) {
  if (Date.now() < due) return wait(id, due, remove);
  let deletion = null;
  try {
    deletion = await api.deletion(id);
  } catch {
    // Unreachable for now: try again below.
  }
  if (deletion && deletion.status !== "scheduled") {
    watched.delete(id);
    // Executed (its receipt may still be on its way): what it removed goes. Cancelled: nothing does.
    if (deletion.deleted?.length) remove(deletion.deleted);
    return;
  }
  if (Date.now() - due > GIVE_UP_MS) {
    watched.delete(id);
    return;
  }
  setTimeout(() => check(id, due, remove), RECHECK_MS);
}
