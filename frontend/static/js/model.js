// What the API's objects mean on screen, defined once for every page: who
// wrote a message, what an untitled thread is called, which statuses are live.
import { el, formatWhen } from "./dom.js";

// A message's status while it is still in memory: active, or expiring (due
// to go at a set time); deleted and purged are removed. The server's
// LIVE_STATUSES (chat) names the same two.
export const LIVE_STATUSES = new Set(["active", "expiring"]);

export function isLive(status) {
  return LIVE_STATUSES.has(status);
}

// "you" / "DeLLM" in tags and running text; `byline` capitalises "You" for
// the author line above a message. A `system` message is the system prompt an
// OpenAI-compatible client sent: stored, an input of the replies it shaped.
export function roleLabel(role, { byline = false } = {}) {
  if (role === "user") return byline ? "You" : "you";
  if (role === "system") return byline ? "System prompt" : "system prompt";
  if (role === "tool") return byline ? "Tool result" : "tool";
  if (role === "note") return byline ? "Agent note" : "agent note";
  if (role === "fact") return byline ? "Fact" : "fact";
  return "DeLLM";
}

// The small coloured tag naming who wrote a message (css: .role-<role>).
export function roleTag(role) {
  return el("span", { class: `role role-${role || "unknown"}` }, roleLabel(role));
}

export function threadTitle(thread) {
  return thread.title || `Untitled · ${formatWhen(thread.created_at)}`;
}
