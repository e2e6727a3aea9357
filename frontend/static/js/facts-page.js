// "What DeLLM knows about you": the live facts by subject, each with its
// date, state and sources; approve, decline, correct or forget each one
// (docs/API.md, "Facts"). A superseded fact shows as history under the one
// that replaced it.
import { request } from "./api.js";
import { el, plural, replaceChildren, timeEl, toast } from "./dom.js";
import { forgetPanel } from "./fact-forget.js";

const root = document.querySelector("[data-facts-page]");
const chatUrl = root.dataset.chatUrl;
const graphUrl = root.dataset.graphUrl;
const host = root.querySelector("[data-facts]");
const progressLine = root.querySelector("[data-facts-progress]");
const more = root.querySelector("[data-facts-more]");

const PAGE_SIZE = 50;
const PROGRESS_POLL_MS = 3000;

const facts = {
  page: (url) => request("GET", url),
  approve: (id) => request("POST", `/api/facts/${id}/approve/`),
  decline: (id) => request("POST", `/api/facts/${id}/decline/`),
  correct: (id, text) => request("POST", `/api/facts/${id}/correct/`, { text }),
  progress: () => request("GET", "/api/facts/progress/"),
};

let loaded = [];
let next = null;
let pages = 0;

// The stored text starts with its subject's label ("Home city: I live in Lisbon."): the heading says it already.
function statement(fact) {
  const head = `${fact.subject_label}: `;
  return fact.text.startsWith(head) ? fact.text.slice(head.length) : fact.text;
}

function sourceLinks(fact) {
  if (!fact.sources.length) return null;
  return el(
    "span",
    { class: "fact-sources" },
    "from ",
    fact.sources.map((source, index) => [
      index ? ", " : "",
      el("a", { href: `${chatUrl}?thread=${source.thread}#m-${source.id}`, title: "Open in the chat", dataset: { source: source.id } }, `#${source.seq}`),
    ]),
  );
}

function factItem(fact, byId, history = []) {
  const superseded = fact.state === "superseded";
  const newer = byId.get(fact.superseded_by);
  const item = el("li", { class: `fact${superseded ? " fact-superseded" : ""}`, dataset: { fact: fact.id, state: fact.state } });
  const actions = el(
    "div",
    { class: "fact-actions" },
    fact.decision === "approved" || superseded ? null : button("Approve", () => act(fact, "approve")),
    superseded ? null : button("Correct", () => openCorrect()),
    button("Decline", () => act(fact, "decline")),
    button("Forget", () => openForget(), "btn-danger-quiet"),
  );
  const extra = el("div", { class: "fact-extra" });
  replaceChildren(
    item,
    el(
      "div",
      { class: "fact-main" },
      el("p", { class: "fact-text" }, statement(fact)),
      el(
        "div",
        { class: "fact-meta muted small" },
        el("a", { class: "seq", href: `${graphUrl}?focus=${fact.id}`, title: "Open in the memory graph" }, `#${fact.seq}`),
        timeEl(fact.said_at),
        fact.decision === "approved" ? el("span", { class: "badge badge-approved" }, "approved") : null,
        superseded ? el("span", { class: "badge badge-superseded" }, `superseded by #${newer?.seq ?? fact.superseded_by}`) : null,
        sourceLinks(fact),
      ),
    ),
    actions,
    extra,
    history.length ? el("ul", { class: "fact-history", "aria-label": "Earlier" }, history.map((older) => factItem(older, byId))) : null,
  );

  function openCorrect() {
    // Empty, not the stored words: a correction is the user's new statement, derived from nothing, and
    // stays when the corrected fact's sources are purged (docs/API.md, facts).
    const input = el("input", { type: "text", class: "fact-input", maxlength: 300, placeholder: "What is true now", "aria-label": "Corrected fact" });
    const error = el("p", { class: "error-text", role: "alert" });
    const form = el(
      "form",
      { class: "fact-correct" },
      input,
      el("button", { type: "submit", class: "btn btn-primary btn-small" }, "Save"),
      el("button", { type: "button", class: "btn btn-quiet btn-small", onclick: () => replaceChildren(extra) }, "Cancel"),
      error,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      input.disabled = true;
      try {
        await facts.correct(fact.id, input.value);
        toast("Corrected.", { kind: "success" });
        await reload();
      } catch (problem) {
        error.textContent = problem.message;
        input.disabled = false;
        input.focus();
      }
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") replaceChildren(extra);
    });
    replaceChildren(extra, form);
    input.focus();
  }

  function openForget() {
    replaceChildren(
      extra,
      forgetPanel(fact, {
        onDone: () => reload(),
        onClose: () => replaceChildren(extra),
      }),
    );
  }
  return item;
}

function button(label, onclick, kind = "btn-quiet") {
  return el("button", { type: "button", class: `btn btn-small ${kind}`, onclick }, label);
}

async function act(fact, verb) {
  try {
    await facts[verb](fact.id);
    toast(verb === "approve" ? "Approved." : "Declined: removed, and never drawn again from those messages.", { kind: "success" });
    await reload();
  } catch (error) {
    toast(error.message, { kind: "error" });
  }
}

// Subjects in the order the API lists them; in each, the current facts with
// the ones they superseded under them.
function render() {
  host.setAttribute("aria-busy", "false");
  more.hidden = !next;
  if (!loaded.length) {
    replaceChildren(
      host,
      el(
        "div",
        { class: "empty-state" },
        el("h2", {}, "Nothing yet"),
        el("p", {}, "As you chat, DeLLM notes short facts about you from your own words: where you live, your work, your pets. They appear here, each with the messages it came from."),
      ),
    );
    return;
  }
  const byId = new Map(loaded.map((fact) => [fact.id, fact]));
  const groups = new Map();
  for (const fact of loaded) {
    if (!groups.has(fact.subject)) groups.set(fact.subject, { label: fact.subject_label, facts: [] });
    groups.get(fact.subject).facts.push(fact);
  }
  replaceChildren(
    host,
    [...groups.entries()].map(([subject, group]) => {
      const current = group.facts.filter((fact) => fact.state === "current");
      const under = new Map(current.map((fact) => [fact.id, []]));
      const loose = [];
      for (const fact of group.facts) {
        if (fact.state === "current") continue;
        (under.get(currentOf(fact, byId)) || loose).push(fact);
      }
      return el(
        "section",
        { class: "fact-group", dataset: { subject }, "aria-labelledby": `subject-${subject}` },
        el("h2", { id: `subject-${subject}` }, group.label),
        el("ul", { class: "facts" }, current.map((fact) => factItem(fact, byId, under.get(fact.id))), loose.map((fact) => factItem(fact, byId))),
      );
    }),
  );
}

// The current fact a superseded one leads to, along `superseded_by` (a fact is superseded by a newer one).
function currentOf(fact, byId) {
  let top = fact;
  for (let steps = 0; top && top.state !== "current" && steps < byId.size; steps += 1) top = byId.get(top.superseded_by);
  return top?.id;
}

async function load(url) {
  const page = await facts.page(url);
  loaded.push(...page.results);
  next = page.next;
  pages += 1;
}

// After a change, the pages read so far again: a decision can reinstate or supersede other facts.
async function reload() {
  const wanted = Math.max(pages, 1);
  loaded = [];
  pages = 0;
  await load(`/api/facts/?page_size=${PAGE_SIZE}`);
  while (next && pages < wanted) await load(next);
  render();
}

let pending = 0;
async function followProgress() {
  try {
    const progress = await facts.progress();
    progressLine.hidden = progress.pending === 0;
    progressLine.textContent = `${plural(progress.pending, "message")} waiting to be read.`;
    // The worker has read what was waiting: its facts are new.
    if (pending > 0 && progress.pending < pending) await reload();
    pending = progress.pending;
  } catch {
    // The line is a hint: a failed poll waits for the next one.
  }
  if (pending > 0) setTimeout(followProgress, PROGRESS_POLL_MS);
}

more.addEventListener("click", async () => {
  more.disabled = true;
  try {
    await load(next);
    render();
  } catch (error) {
    toast(error.message, { kind: "error" });
  } finally {
    more.disabled = false;
  }
});

reload()
  .catch((error) => {
    host.setAttribute("aria-busy", "false");
    replaceChildren(host, el("p", { class: "error-text" }, error.message));
  })
  .finally(followProgress);
