"""The graph page preloads every module it imports, no more: its list is held to the modules' own imports."""

import re
from pathlib import PurePosixPath

from core.middleware import IMPORTS
from tests.helpers import ROOT

STATIC = ROOT / "frontend" / "static"
# `from "./x.js";`, `import "./x.js";` or `import("./x.js");` at a line's end.
SPECIFIER = re.compile(r'(?:from |import |import\()"([^"]+)"\)?;$', re.MULTILINE)
PRELOAD = re.compile(r"""<link rel="modulepreload" href="\{% static '([^']+)' %\}">""")


def imported(entry: str) -> set[str]:
    """Static paths of every module `entry` imports, directly or not (vendor modules are not read)."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        for specifier in SPECIFIER.findall((STATIC / path).read_text()):
            if specifier in IMPORTS:
                seen.add(IMPORTS[specifier])
                continue
            target = str(PurePosixPath(path).parent / specifier)
            target = str(PurePosixPath(*_normalised(target.split("/"))))
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _normalised(parts: list[str]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            out.pop()
        elif part not in (".", ""):
            out.append(part)
    return out


def test_graph_page_preloads_exactly_the_modules_it_imports():
    template = (ROOT / "frontend" / "templates" / "graph.html").read_text()
    preloaded = PRELOAD.findall(template)
    assert len(preloaded) == len(set(preloaded))
    assert set(preloaded) == imported("js/graph-page.js")
