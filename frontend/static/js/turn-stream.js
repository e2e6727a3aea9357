// Follows one chat turn to its end: Server-Sent Events from
// /api/turns/{id}/events/, or polling /api/turns/{id}/ when the stream fails.
import { api } from "./api.js";

const POLL_MS = [500, 1000, 1500, 2500];

export function followTurn(turnId, handlers) {
  let finished = false;
  let pollTimer = null;
  let source = null;

  function finish(kind, turn) {
    if (finished) return;
    finished = true;
    source?.close();
    clearTimeout(pollTimer);
    (kind === "done" ? handlers.onDone : handlers.onFailed)(turn);
  }

  function poll(attempt = 0) {
    if (finished) return;
    pollTimer = setTimeout(async () => {
      try {
        const turn = await api.turn(turnId);
        if (turn.status === "done" || turn.status === "failed") {
          finish(turn.status, turn);
          return;
        }
        handlers.onStatus(turn.status);
      } catch (error) {
        handlers.onStatus("unreachable", error);
      }
      poll(attempt + 1);
    }, POLL_MS[Math.min(attempt, POLL_MS.length - 1)]);
  }

  const data = (event) => JSON.parse(event.data);
  if ("EventSource" in window) {
    source = new EventSource(api.turnEventsUrl(turnId));
    source.addEventListener("status", (event) => handlers.onStatus(data(event).status));
    source.addEventListener("token", (event) => handlers.onToken(data(event).text));
    source.addEventListener("reset", () => handlers.onReset());
    source.addEventListener("reply", (event) => finish("done", data(event).turn));
    source.addEventListener("failed", (event) => finish("failed", data(event).turn));
    // The server gave up waiting (or the connection broke): carry on by polling,
    // rather than letting EventSource reconnect and replay the status.
    source.addEventListener("timeout", () => {
      source.close();
      poll();
    });
    source.addEventListener("error", () => {
      if (finished) return;
      source.close();
      poll();
    });
  } else {
    poll();
  }

  return {
    stop() {
      finished = true;
      source?.close();
      clearTimeout(pollTimer);
    },
  };
}
