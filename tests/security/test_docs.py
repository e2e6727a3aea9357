"""docs/SECURITY.md's erasure timeline is the eraser's registry in words, and cites only tests that exist."""

import re

from provenance.erasure.registry import INDEXES, REGISTRY, Way
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
