// Tool steps of an OpenAI-compatible client: a reply in which the
// model called the client's tools, the client's result for one call, and a
// reply written after tool results. Each is a stored message with its own
// provenance; these helpers mark them the same way everywhere.
import { el, plural } from "./dom.js";

const KINDS = {
  call: ["tool call", "The model called one of your client's tools here."],
  result: ["tool result", "What your client's tool returned: it derives from the call that asked for it."],
  answer: ["used tools", "A reply written after tool results: it derives from them."],
};

export function toolStepBadge(kind) {
  if (!KINDS[kind]) return null;
  const [label, title] = KINDS[kind];
  return el("span", { class: `badge badge-tool badge-tool-${kind}`, title, dataset: { toolStep: kind } }, label);
}

// The kind of tool step a graph node is ("call", "result", "answer"), or null.
export function toolStepOf(node) {
  if (!node?.length) return null;
  if (node.data("tool_step")) return node.data("tool_step");
  return node.data("used_tools") ? "answer" : null;
}

// The sentence a deletion preview shows when tool steps are among what goes.
export function toolStepsNote(count) {
  if (!count) return null;
  return el(
    "p",
    { class: "tool-note", dataset: { toolSteps: count } },
    el("strong", {}, `${plural(count, "tool step")} will go`),
    " (your client's tool calls, their results and the replies that used them). They are deleted, never rewritten: DeLLM cannot run your client's tools again.",
  );
}
