"""The docs are true to the code: SECURITY.md's erasure timeline is the eraser's registry in words, and every doc
cites only files, tests, modules and functions that exist."""

import ast
import importlib
import io
import re
import tokenize

from django.apps import apps

from dellm_site.celery import app as celery_app
from provenance.erasure.indexes import INDEXES
from provenance.erasure.places import Way
from provenance.erasure.registry import REGISTRY
from tests.helpers import ROOT

SECURITY = (ROOT / "docs" / "SECURITY.md").read_text()
CITATION = re.compile(r"tests/[\w/]+\.py(?:::\w+)?")


def _exists(citation: str) -> bool:
    path, _, name = citation.partition("::")
    file = ROOT / path
    return file.is_file() and (not name or re.search(rf"^(async )?def {name}\(", file.read_text(), re.M) is not None)


def test_security_md_cites_only_tests_that_exist():
    citations = sorted(set(CITATION.findall(SECURITY)))
    assert len(citations) >= 10
    assert [citation for citation in citations if not _exists(citation)] == []


def test_every_registry_test_exists():
    assert [place.name for place in REGISTRY if place.test and not _exists(place.test)] == []
    assert [place.name for place in REGISTRY if not place.test and place.way is not Way.PHYSICAL] == []


def test_erasure_timeline_names_every_registered_place_with_its_test():
    section = SECURITY.split("## Erasure timeline (purge)")[1].split("\n#")[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| `")}
    text_indexes = {place.name for place in INDEXES if place.way is not Way.NO_TEXT}
    places = [
        place for place in REGISTRY if place.way is not Way.NO_TEXT or place.name not in {i.name for i in INDEXES}
    ]
    assert sorted(f"`{place.name}`" for place in places) == sorted(rows)
    assert [p.name for p in places if p.test and f"`{p.test}`" not in rows[f"`{p.name}`"]] == []
    assert text_indexes <= {name.strip("`") for name in rows}


DOCS = sorted([*ROOT.glob("docs/**/*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("lab/*.md")])
PATH = re.compile(r"(?<![\w/.-])(?:core|chat|provenance|assistant|dellm_site|lab|tests|frontend)/[\w/.-]*\w(?:::\w+)?")
DOTTED = re.compile(r"(?<![\w/.-])(?:core|chat|provenance|assistant|dellm_site)(?:\.\w+)+")
# Dotted names that are not modules: OpenAI's object types.
OBJECT_TYPES = {"chat.completion", "chat.completion.chunk"}


def _resolves(dotted: str) -> bool:
    """`a.b.c` names a module, a module's attribute or a member of that; `app.Model` a model, `app.0001` a migration."""
    parts = dotted.split(".")
    if len(parts) == 2 and parts[1][0].isdigit():
        return any(ROOT.glob(f"{parts[0]}/migrations/{parts[1]}*.py"))
    if len(parts) == 2 and parts[1][0].isupper() and parts[0] in {"chat", "provenance"}:
        return parts[1] in {model.__name__ for model in apps.get_app_config(parts[0]).get_models()}
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(value, name):
                return False
            value = getattr(value, name)
        return True
    return False


def _cited(pattern: re.Pattern) -> dict[str, list[str]]:
    """{citation: [the docs that cite it]} for every match of `pattern` in the docs."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for match in pattern.finditer(doc.read_text()):
            found.setdefault(match.group(0), []).append(str(doc.relative_to(ROOT)))
    return found


def test_docs_cite_only_files_folders_and_tests_that_exist():
    missing = {
        citation: docs
        for citation, docs in _cited(PATH).items()
        if not (_exists(citation) if "::" in citation else (ROOT / citation).exists())
    }
    assert missing == {}


def test_docs_name_only_modules_functions_and_tasks_that_exist():
    celery_app.loader.import_default_modules()
    known = OBJECT_TYPES | set(celery_app.tasks)
    unresolved = {dotted: docs for dotted, docs in _cited(DOTTED).items() if not (dotted in known or _resolves(dotted))}
    assert unresolved == {}


# A path the product's docstrings and comments name, from the root (`docs/RETRIEVAL.md`, `chat/statements.py`).
NAMED_PATH = re.compile(r"(?<![\w/.-])(?:core|chat|provenance|assistant|dellm_site|lab|frontend|docs)/[\w/.-]*\w")
PRODUCT_PACKAGES = ("core", "chat", "provenance", "assistant", "dellm_site", "lab")


def _docstrings_and_comments(source: str) -> list[str]:
    texts = [
        doc
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and (doc := ast.get_docstring(node, clean=False))
    ]
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return texts + [token.string for token in tokens if token.type == tokenize.COMMENT]


def test_product_docstrings_and_comments_name_only_paths_that_exist():
    modules = [
        path
        for package in PRODUCT_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    ]
    missing = {
        (str(module.relative_to(ROOT)), match.group(0))
        for module in modules
        for text in _docstrings_and_comments(module.read_text())
        for match in NAMED_PATH.finditer(text)
        if not (ROOT / match.group(0).rstrip(".")).exists()
    }
    assert sorted(missing) == []


def test_docs_point_at_nothing_outside_the_repository():
    outside = re.compile(r"(?<![\w.])\.\./|(?<![\w.])/(?:work|home|root)/")
    assert {str(doc.relative_to(ROOT)) for doc in DOCS if outside.search(doc.read_text())} == set()
