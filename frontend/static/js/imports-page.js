// The import page: upload a history, follow the job's progress over SSE,
// then show its counts, the conversations that were refused, and links to
// the imported threads.
import { ApiError, api, csrfToken } from "./api.js";
import { el, formatWhen, plural, replaceChildren, toast } from "./dom.js";
import { sourceName } from "./imported.js";

const root = document.querySelector("[data-import]");
const chatUrl = root.dataset.chatUrl;
const form = root.querySelector("[data-import-form]");
const submit = root.querySelector("[data-import-submit]");
const formError = root.querySelector("[data-import-error]");
const progressBox = root.querySelector("[data-import-progress]");
const bar = root.querySelector("[data-import-bar]");
const statusLine = root.querySelector("[data-import-status]");
const result = root.querySelector("[data-import-result]");
const historyList = root.querySelector("[data-import-history]");

async function upload(file, format) {
  const body = new FormData();
  body.append("file", file);
  if (format) body.append("format", format);
  let response;
  try {
    response = await fetch("/api/imports/", {
      method: "POST",
      body,
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    });
  } catch {
    throw new ApiError(0, { error: { message: "The server cannot be reached. Check your connection." } });
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

function showProgress(job) {
  progressBox.hidden = false;
  bar.max = Math.max(job.messages_total, 1);
  bar.value = job.messages_done;
  progressBox.dataset.status = job.status;
  statusLine.textContent =
    job.status === "pending"
      ? "Waiting for a worker…"
      : `${job.messages_done} of ${plural(job.messages_total, "message")} · ${job.conversations_done} of ${plural(job.conversations_total, "conversation")}`;
}

async function showResult(job) {
  showProgress(job);
  const titles = new Map((await api.threads().catch(() => [])).map((thread) => [thread.id, thread.title]));
  bar.value = bar.max;
  const failed = job.status === "failed";
  statusLine.textContent = failed ? `The import stopped: ${job.error}` : "Import finished.";
  const threads = job.threads.map((id, index) => el("li", {}, el("a", { href: `${chatUrl}?thread=${id}`, dataset: { thread: id } }, titles.get(id) || `Imported thread ${index + 1}`)));
  replaceChildren(
    result,
    el(
      "p",
      { dataset: { testid: "import-counts" } },
      `${plural(job.messages_imported, "message")} imported`,
      job.messages_skipped ? `, ${job.messages_skipped} skipped (already there, or derived from something you deleted)` : "",
      `, ${plural(job.edges_created, "provenance edge")}; `,
      `${plural(job.conversations_total - job.conversations_failed, "conversation")} from ${sourceName(job.format)}.`,
    ),
    job.errors.length
      ? [
          el("h3", {}, `${plural(job.errors.length, "conversation")} not imported`),
          el("ul", { class: "import-errors" }, job.errors.map((error) => el("li", {}, `${error.conversation}: ${error.field} ${error.message}`))),
        ]
      : null,
    threads.length ? [el("h3", {}, "Imported threads"), el("ul", { dataset: { importThreads: "" } }, threads)] : null,
  );
  loadHistory();
}

function follow(job) {
  showProgress(job);
  const source = new EventSource(api.importEventsUrl(job.id));
  const finish = (event) => {
    source.close();
    submit.disabled = false;
    showResult(JSON.parse(event.data).import).catch((error) => toast(error.message, { kind: "error" }));
  };
  source.addEventListener("progress", (event) => showProgress(JSON.parse(event.data).import));
  source.addEventListener("done", finish);
  source.addEventListener("failed", finish);
  source.addEventListener("timeout", () => {
    source.close();
    api.importJob(job.id).then(showProgress).catch(() => {});
    submit.disabled = false;
  });
  source.onerror = () => {
    // The stream dropped: read the job once so the page is not left stale.
    if (source.readyState === EventSource.CLOSED) api.importJob(job.id).then(showProgress).catch(() => {});
  };
}

async function loadHistory() {
  try {
    const page = await api.imports();
    replaceChildren(
      historyList,
      page.results.length
        ? page.results.map((job) =>
            el("li", {}, `${formatWhen(job.created_at)} · ${job.filename || "upload"} · ${sourceName(job.format)} · ${job.status} · ${plural(job.messages_imported, "message")}`),
          )
        : el("li", { class: "muted" }, "None yet."),
    );
  } catch (error) {
    replaceChildren(historyList, el("li", { class: "error-text" }, error.message));
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  formError.textContent = "";
  const file = form.elements.file.files[0];
  if (!file) {
    formError.textContent = "Choose a file to import.";
    return;
  }
  submit.disabled = true;
  replaceChildren(result);
  try {
    follow(await upload(file, form.elements.format.value));
  } catch (error) {
    submit.disabled = false;
    formError.textContent = error.message;
  }
});

loadHistory().catch((error) => toast(error.message, { kind: "error" }));
