// Small DOM helpers. Text always goes in as text nodes, never as HTML, so
// message content can hold anything.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2).toLowerCase(), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, value);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replaceChildren(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// Made on first use: a formatter loads the locale's data, about 100 ms on a
// page's first one, which would otherwise delay every page that imports this.
const formats = {};
function format(style) {
  formats[style] ??= new Intl.DateTimeFormat(
    undefined,
    style === "time" ? { timeStyle: "short" } : { dateStyle: "medium", timeStyle: "short" },
  );
  return formats[style];
}

export function formatWhen(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  const today = new Date();
  return format(date.toDateString() === today.toDateString() ? "time" : "dateTime").format(date);
}

export function timeEl(iso) {
  return el("time", { datetime: iso, title: iso ? format("dateTime").format(new Date(iso)) : undefined }, formatWhen(iso));
}

export function snippet(text, limit = 140) {
  const flat = (text || "").split(/\s+/).join(" ").trim();
  return flat.length > limit ? `${flat.slice(0, limit - 1).trimEnd()}…` : flat;
}

export function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

// A value for <input type="datetime-local"> some minutes from now, in local time.
export function localDateTimeIn(minutes) {
  const date = new Date(Date.now() + minutes * 60_000);
  date.setSeconds(0, 0);
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

export function toast(message, { kind = "info", action } = {}) {
  const host = document.querySelector("[data-toasts]");
  if (!host) return;
  const item = el("div", { class: `toast toast-${kind}` }, el("span", {}, message));
  if (action) {
    item.append(
      el("button", { type: "button", class: "btn btn-quiet btn-small", onclick: () => { item.remove(); action.run(); } }, action.label),
    );
  }
  item.append(el("button", { type: "button", class: "toast-close", "aria-label": "Dismiss", onclick: () => item.remove() }, "×"));
  host.append(item);
  setTimeout(() => item.remove(), action ? 10_000 : 5_000);
}
