// Erasing the whole account from the deletions page: a confirmation that says
// what goes (counted by the server) and asks for the username, then sign-in.
import { api } from "./api.js";
import { el, plural, toast } from "./dom.js";
import { confirmDialog } from "./ui.js";

const button = document.querySelector("[data-erase-account]");

button.addEventListener("click", async () => {
  button.disabled = true;
  try {
    const account = await api.account();
    const typed = el("input", { name: "username", autocomplete: "off", "aria-label": "Your username", class: "erase-confirm-input" });
    const sure = await confirmDialog({
      title: "Erase your account?",
      body: el(
        "div",
        {},
        el(
          "ul",
          {},
          el("li", {}, plural(account.threads, "thread")),
          el("li", {}, plural(account.messages, "message")),
          el("li", {}, plural(account.deletions, "deletion"), " in your history"),
          el("li", {}, plural(account.imports, "import")),
          el("li", {}, plural(account.tokens, "token"), " (API and agents), revoked"),
        ),
        el("p", {}, "All of it is erased for good, with your sign-in. Type your username, ", el("strong", {}, account.username), ", to confirm."),
        typed,
      ),
      confirmLabel: "Erase everything",
      danger: true,
    });
    if (!sure) return;
    if (typed.value !== account.username) {
      toast("Type the account's username to confirm its erasure.", { kind: "error" });
      return;
    }
    await api.eraseAccount(typed.value);
    window.location.assign("/accounts/login/?erased=1");
  } catch (error) {
    toast(error.message, { kind: "error" });
  } finally {
    button.disabled = false;
  }
});
