// Which of a deletion's messages agents (MCP clients) were shown, by which
// client and when: ids, client and time only, never text. DeLLM
// erases its own copies; these are outside it, so the preview, the receipt
// and the deletions page say so, the same way everywhere.
import { el, formatWhen, plural } from "./dom.js";

// {client: {reads, last, messages: Set}} of a deletion's `agent_reads.reads` (newest first).
function byClient(reads) {
  const clients = new Map();
  for (const read of reads) {
    const entry = clients.get(read.client) || { reads: 0, last: read.read_at, messages: new Set() };
    entry.reads += 1;
    read.messages.forEach((id) => entry.messages.add(id));
    clients.set(read.client, entry);
  }
  return clients;
}

// {message id: [clients]} for the badges beside each message of a preview.
export function readersByMessage(agentReads) {
  const readers = new Map();
  for (const read of agentReads?.reads || []) {
    for (const id of read.messages) {
      const names = readers.get(id) || [];
      if (!names.includes(read.client)) names.push(read.client);
      readers.set(id, names);
    }
  }
  return readers;
}

export function readByBadge(clients) {
  if (!clients?.length) return null;
  return el("span", { class: "badge badge-agent-read", title: "An agent was shown this memory: its copy is outside DeLLM.", dataset: { readBy: clients.join(",") } }, `read by ${clients.join(", ")}`);
}

// The sentence: each client, how many reads, the latest, and that their copies are outside DeLLM.
export function agentReadsNote(agentReads, { tag = "p" } = {}) {
  if (!agentReads?.count) return null;
  const clients = [...byClient(agentReads.reads).entries()].map(
    ([client, entry]) => `${client} (${plural(entry.messages.size, "memory", "memories")}, ${plural(entry.reads, "read")}, last ${formatWhen(entry.last)})`,
  );
  const unlisted = agentReads.count - agentReads.reads.length;
  return el(
    tag,
    { class: "agent-note small warn-text", dataset: { agentReads: agentReads.count }, title: agentReads.note },
    el("strong", {}, "Read by agents: "),
    clients.join("; "),
    unlisted > 0 ? ` and ${plural(unlisted, "earlier read")}` : "",
    ". DeLLM cannot erase their copies: ask them to forget too.",
  );
}
