"""Lines per app and imports between apps, for a checkout directory (ast-based; function-level imports included)."""

import ast
import sys
from collections import Counter
from pathlib import Path

root = Path(sys.argv[1])
apps = ["chat", "provenance", "dellm_site", "lab"]
lines = Counter()
files = Counter()
edges = Counter()
where = {}
for app in apps:
    for path in sorted((root / app).rglob("*.py")) if (root / app).exists() else []:
        rel = path.relative_to(root)
        sub = rel.parts[1] if len(rel.parts) > 2 else ""
        # Report bench/evaluation/migrations separately (the research harness and the schema history).
        key = app + ("/" + sub if sub in ("bench", "evaluation", "migrations") else "")
        text = path.read_text()
        lines[key] += len(text.splitlines())
        files[key] += 1
        for node in ast.walk(ast.parse(text)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in apps and top != app:
                    src = ".".join(rel.with_suffix("").parts)
                    edges[(key, top)] += 1
                    where.setdefault((key, top), set()).add(src)
print("| part | files | lines |\n|---|---|---|")
for key in sorted(lines):
    print(f"| {key} | {files[key]} | {lines[key]} |")
print("\n| from | to | import statements | modules |\n|---|---|---|---|")
for (a, b), n in sorted(edges.items()):
    print(f"| {a} | {b} | {n} | {', '.join(sorted(where[(a, b)]))} |")
