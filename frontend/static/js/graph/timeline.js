// The layered layout for big graphs, linear in nodes + edges: a node's column
// is its longest path from a source (a user message sits just before the
// first reply that used it), and within a column messages stack in seq order.
// Plain data in, plain positions out: it runs in the layout worker.
//
//   timelinePositions([{ id, seq }], [{ source, target }]) -> Map(id -> { x, y })
export function timelinePositions(nodes, edges) {
  const bySeq = [...nodes].sort((a, b) => a.seq - b.seq);
  const preds = new Map(bySeq.map((node) => [node.id, []]));
  const succs = new Map(bySeq.map((node) => [node.id, []]));
  for (const edge of edges) {
    if (!preds.has(edge.target) || !succs.has(edge.source)) continue;
    preds.get(edge.target).push(edge.source);
    succs.get(edge.source).push(edge.target);
  }
  const column = new Map();
  for (const node of bySeq) {
    let value = 0;
    for (const source of preds.get(node.id)) value = Math.max(value, column.get(source) + 1);
    column.set(node.id, value);
  }
  for (let index = bySeq.length - 1; index >= 0; index -= 1) {
    const node = bySeq[index];
    const next = succs.get(node.id);
    if (!preds.get(node.id).length && next.length) {
      column.set(node.id, Math.max(0, Math.min(...next.map((target) => column.get(target))) - 1));
    }
  }
  const rows = new Map();
  const positions = new Map();
  for (const node of bySeq) {
    const x = column.get(node.id);
    const y = rows.get(x) || 0;
    rows.set(x, y + 1);
    positions.set(node.id, { x: x * 90, y: y * 44 });
  }
  return positions;
}
