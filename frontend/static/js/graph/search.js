// Find: "#12" or "12" finds by seq, anything else by words: at once in the
// labels (a message's first words), then, where the source can (`find`), in
// what each message of the window says, read by the server. Enter steps
// through the matches in seq order.
import { plural } from "../dom.js";

// The server reads at most this much of a query (GET /api/graph/find/).
const FIND_MAX = 200;

// Returns once the server's matches are in too.
export async function search(x, text) {
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
    addMatches(x, found);
    showCount(x);
    if (!seq && x.source.find && query.length <= FIND_MAX) await findSaid(x, query);
  }
  showCount(x);
}

// Words past a label's first words. A failure (a throttle, the network) leaves the labels' matches.
async function findSaid(x, query) {
  const cy = x.cy;
  let ids;
  try {
    ids = await x.source.find(x.filters, query);
  } catch {
    return;
  }
  if (x.cy !== cy || x.matchQuery !== query) return;
  const current = x.matches[x.matchIndex];
  addMatches(x, cy.collection(ids.map((id) => x.node(id)).filter((node) => node?.length)));
  x.matchIndex = current === undefined ? -1 : x.matches.indexOf(current);
  showCount(x);
}

function addMatches(x, nodes) {
  nodes.addClass("match");
  const ids = new Set([...x.matches, ...nodes.map((node) => node.data("mid"))]);
  x.matches = [...ids].sort((a, b) => x.node(a).data("seq") - x.node(b).data("seq"));
}

function showCount(x) {
  const query = x.matchQuery;
  x.dom.searchCount.textContent = query ? (x.matches.length ? plural(x.matches.length, "match", "matches") : "no match") : "";
}

export async function nextMatch(x) {
  // Enter right after typing comes before the debounced search: the matches may be the previous text's.
  const text = x.dom.searchInput.value;
  if (!x.matches.length || x.matchQuery !== text.trim().toLowerCase()) {
    const searched = search(x, text);
    // Nothing in the labels: wait for what the messages say.
    if (!x.matches.length) await searched;
  }
  if (!x.matches.length) return;
  x.matchIndex = (x.matchIndex + 1) % x.matches.length;
  x.select(x.matches[x.matchIndex], { center: true });
}
