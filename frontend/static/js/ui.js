// Shared widgets: modal confirmation, focus trap, deletion mode picker.
import { el, localDateTimeIn } from "./dom.js";

const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

// Keeps Tab inside `container` and closes on Escape; returns a release function
// that gives focus back to where it was.
export function trapFocus(container, { onEscape } = {}) {
  const previous = document.activeElement;
  function onKeydown(event) {
    if (event.key === "Escape" && onEscape) {
      event.preventDefault();
      onEscape();
      return;
    }
    if (event.key !== "Tab") return;
    const items = [...container.querySelectorAll(FOCUSABLE)].filter((item) => item.offsetParent !== null);
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  }
  container.addEventListener("keydown", onKeydown);
  return () => {
    container.removeEventListener("keydown", onKeydown);
    if (previous && previous.isConnected) previous.focus();
  };
}

// A modal <dialog>: the browser makes the page behind it inert and closes it
// on Escape. Resolves true when confirmed.
export function confirmDialog({ title, body, confirmLabel = "Confirm", danger = false }) {
  return new Promise((resolve) => {
    const titleId = `dialog-title-${Math.random().toString(36).slice(2)}`;
    const confirm = el("button", { type: "submit", value: "confirm", class: `btn ${danger ? "btn-danger" : "btn-primary"}` }, confirmLabel);
    const dialog = el(
      "dialog",
      { class: "modal", "aria-labelledby": titleId },
      el(
        "form",
        { method: "dialog" },
        el("h2", { id: titleId }, title),
        el("div", { class: "modal-body" }, body),
        el(
          "div",
          { class: "modal-actions" },
          el("button", { type: "submit", value: "cancel", class: "btn btn-quiet", autofocus: true }, "Cancel"),
          confirm,
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "confirm");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

const MODES = [
  { value: "soft", label: "Soft delete", help: "Hidden from memory and history; you can undo it." },
  { value: "purge", label: "Purge", help: "Text destroyed for good; cannot be undone." },
  { value: "expire", label: "Expire later", help: "Deleted at the time you choose, with whatever derives from it by then." },
];

export function modeLabel(mode) {
  return MODES.find((item) => item.value === mode)?.label || mode;
}

// Radio buttons for soft / purge / expire, plus the expiry time.
export function modePicker({ name, initial = "soft" }) {
  const whenId = `${name}-when`;
  const when = el("input", { type: "datetime-local", id: whenId, name: `${name}-when`, value: localDateTimeIn(60), min: localDateTimeIn(1) });
  const whenField = el("div", { class: "mode-when", hidden: initial !== "expire" }, el("label", { for: whenId }, "Delete at"), when);
  const fieldset = el(
    "fieldset",
    { class: "mode-picker" },
    el("legend", {}, "How"),
    MODES.map((mode) => {
      const id = `${name}-${mode.value}`;
      return el(
        "label",
        { class: `mode-option mode-${mode.value}`, for: id },
        el("input", { type: "radio", name, id, value: mode.value, checked: mode.value === initial }),
        el("span", { class: "mode-text" }, el("strong", {}, mode.label), el("small", {}, mode.help)),
      );
    }),
    whenField,
  );
  fieldset.addEventListener("change", () => {
    whenField.hidden = picker.mode() !== "expire";
  });
  const picker = {
    element: fieldset,
    mode: () => fieldset.querySelector("input[type=radio]:checked")?.value || "soft",
    // {mode, expire_at} for POST /api/deletions/, or throws a sentence for the user.
    value() {
      const mode = picker.mode();
      if (mode !== "expire") return { mode };
      const date = new Date(when.value);
      if (!when.value || Number.isNaN(date.getTime()) || date <= new Date()) {
        when.focus();
        throw new Error("Choose a time in the future for the deletion.");
      }
      return { mode, expire_at: date.toISOString() };
    },
    // The choice, or null after showing why it is not valid in `errorElement`.
    choiceOrError(errorElement) {
      errorElement.textContent = "";
      try {
        return picker.value();
      } catch (problem) {
        errorElement.textContent = problem.message;
        return null;
      }
    },
    describe() {
      const mode = picker.mode();
      if (mode === "soft") return "soft delete (you can undo it from Deletions)";
      if (mode === "purge") return "purge (the text is destroyed; this cannot be undone)";
      return `expire at ${new Date(when.value).toLocaleString()}`;
    },
  };
  return picker;
}

// "#12 → #14 → #19" for an explanation path of ids.
export function pathLabel(path, seqOf) {
  return path.map((id) => `#${seqOf(id) ?? "?"}`).join(" → ");
}
