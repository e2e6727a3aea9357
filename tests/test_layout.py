"""The house stays as CONTRIBUTING.md describes it: no product module past 500 lines (migrations aside)."""

from tests.helpers import ROOT

PRODUCT = ("core", "chat", "provenance", "assistant", "dellm_site")
MAX_LINES = 500


def _lines(path) -> int:
    return len(path.read_text().splitlines())


def test_no_product_module_is_over_500_lines():
    modules = [
        *(path for package in PRODUCT for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts),
        *(ROOT / "frontend" / "static" / "js").rglob("*.js"),
    ]
    assert len(modules) > 100
    assert {str(path.relative_to(ROOT)): _lines(path) for path in modules if _lines(path) > MAX_LINES} == {}
