// Find: "#12" or "12" finds by seq, anything else by words in the label;
// Enter steps through the matches in seq order.
import { plural } from "../dom.js";

export function search(x, text) {
  if (!x.cy) return;
  const query = text.trim().toLowerCase();
  x.matchQuery = query;
  x.cy.nodes().removeClass("match");
  x.matches = [];
  x.matchIndex = -1;
  if (query) {
    const seq = /^#?(\d+)$/.exec(query);
    const found = x.cy.nodes().filter((node) =>
      seq ? node.data("seq") === Number(seq[1]) : node.data("label").toLowerCase().includes(query),
    );
    found.addClass("match");
    x.matches = found.map((node) => node.data("mid")).sort((a, b) => x.node(a).data("seq") - x.node(b).data("seq"));
  }
  x.dom.searchCount.textContent = query ? (x.matches.length ? plural(x.matches.length, "match", "matches") : "no match") : "";
}

export function nextMatch(x) {
  // Enter right after typing comes before the debounced search: the matches may be the previous text's.
  const text = x.dom.searchInput.value;
  if (!x.matches.length || x.matchQuery !== text.trim().toLowerCase()) search(x, text);
  if (!x.matches.length) return;
  x.matchIndex = (x.matchIndex + 1) % x.matches.length;
  x.select(x.matches[x.matchIndex], { center: true });
}
