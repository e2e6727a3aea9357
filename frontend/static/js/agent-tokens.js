// Agent tokens on the deletions page: make one for an MCP client (its secret is
// shown once), list them, revoke one. An agent token opens /mcp only.
import { api } from "./api.js";
import { el, replaceChildren, timeEl, toast } from "./dom.js";
import { confirmDialog } from "./ui.js";

const form = document.querySelector("[data-agent-token-form]");
const secretHost = document.querySelector("[data-agent-token-secret]");
const listHost = document.querySelector("[data-agent-tokens]");

function row(token) {
  const revoke = el("button", { type: "button", class: "btn btn-quiet btn-small" }, "Revoke");
  revoke.addEventListener("click", async () => {
    const sure = await confirmDialog({
      title: `Revoke the token of ${token.name}?`,
      body: el("p", {}, "The agent holding it is refused at once; make a new token to connect it again."),
      confirmLabel: "Revoke",
      danger: true,
    });
    if (!sure) return;
    revoke.disabled = true;
    try {
      await api.revokeAgentToken(token.id);
      toast(`The token of ${token.name} is revoked.`, { kind: "success" });
      await load();
    } catch (error) {
      revoke.disabled = false;
      toast(error.message, { kind: "error" });
    }
  });
  return el("tr", { dataset: { agentToken: token.id } }, el("td", {}, token.name), el("td", {}, timeEl(token.created_at)), el("td", {}, revoke));
}

async function load() {
  try {
    const tokens = await api.agentTokens();
    if (!tokens.length) {
      replaceChildren(listHost, el("p", { class: "muted" }, "No agent holds a token."));
      return;
    }
    replaceChildren(
      listHost,
      el(
        "table",
        { class: "history" },
        el("caption", { class: "visually-hidden" }, "Your agent tokens, newest first"),
        el("thead", {}, el("tr", {}, ["Agent", "Made", "Actions"].map((name) => el("th", { scope: "col" }, name)))),
        el("tbody", {}, tokens.map(row)),
      ),
    );
  } catch (error) {
    replaceChildren(listHost, el("p", { class: "error-text" }, error.message));
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const button = form.querySelector("button");
  button.disabled = true;
  try {
    const made = await api.makeAgentToken(form.elements.name.value);
    form.reset();
    secretHost.hidden = false;
    replaceChildren(
      secretHost,
      el("p", {}, `The token of ${made.name}, shown this once: give it to the agent as `, el("code", {}, "Authorization: Bearer <token>"), "."),
      el("input", { class: "agent-token-secret", readonly: true, value: made.token, "aria-label": `Token of ${made.name}` }),
    );
    secretHost.querySelector("input").select();
    await load();
  } catch (error) {
    toast(error.message, { kind: "error" });
  } finally {
    button.disabled = false;
  }
});

load();
