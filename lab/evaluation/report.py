"""Writes a run's results: raw JSON, a markdown report with the paper's tables, and the threshold plot."""

import json
from pathlib import Path

# The Figure API draws with the Agg canvas and never touches pyplot's global
# state or a GUI backend, so it works headless and inside tests.
from matplotlib.figure import Figure

from lab.evaluation.metrics import HIT_RECALL


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def _table(header: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out)


def _systems(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["system"] for r in rows))


def _datasets(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["dataset"] for r in rows))


def tables_markdown(rows: list[dict]) -> str:
    """The paper's three tables (utility; forget before/after; retain before/after), plus deletion costs."""
    by = {(r["dataset"], r["system"]): r for r in rows}
    datasets = _datasets(rows)
    systems = _systems(rows)

    def cell(dataset, system, key):
        row = by.get((dataset, system))
        return _fmt(row[key]) if row else "–"

    utility = _table(
        ["system", *(f"{d} utility" for d in datasets), *(f"{d} ROUGE-L recall" for d in datasets)],
        [
            [s, *(cell(d, s, "utility") for d in datasets), *(cell(d, s, "utility_rouge") for d in datasets)]
            for s in systems
        ],
    )
    sections = ["### Table 1: utility before any deletion (all questions, %)", utility]
    for part, title in (("forget", "Table 2: forget questions"), ("retain", "Table 3: retain questions")):
        header = ["system"]
        for d in datasets:
            header += [f"{d} before", f"{d} after", f"{d} ROUGE-L before", f"{d} ROUGE-L after"]
        lines = []
        for s in systems:
            line = [s]
            for d in datasets:
                line += [cell(d, s, f"{part}_{p}") for p in ("before", "after")]
                line += [cell(d, s, f"{part}_{p}_rouge") for p in ("before", "after")]
            lines.append(line)
        sections += [f"### {title}, before and after deletion (%)", _table(header, lines)]
    cost_header = ["system"]
    for d in datasets:
        cost_header += [
            f"{d} deletion rate %",
            f"{d} deleted msgs",
            f"{d} retain facts lost",
            f"{d} copies left",
            f"{d} answers leaking",
            f"{d} collateral loss",
            f"{d} model calls",
        ]
    cost_lines = []
    for s in systems:
        line = [s]
        for d in datasets:
            row = by.get((d, s))
            line += (
                [
                    _fmt(row["deletion_rate"]),
                    str(row["deleted"]),
                    str(row["retain_facts_lost"]),
                    str(row["residual_copies"]),
                    str(row["forget_leaks"]),
                    f"{row['collateral_loss']} ({_fmt(row['collateral_loss_pct'])} %)",
                    str(row["model_calls"]),
                ]
                if row
                else ["–"] * 7
            )
        cost_lines.append(line)
    sections += ["### Deletion: rate, collateral and leftovers", _table(cost_header, cost_lines)]
    return "\n\n".join(sections)


def plot_thresholds(rows: list[dict], path: Path) -> bool:
    """Figure 8: semantic:<t> forget/retain utility after deletion vs t, with dellm and no_memory as lines.

    Returns False (and writes nothing) when the run has no semantic systems.
    """
    datasets = [
        d for d in _datasets(rows) if any(r["dataset"] == d and r["system"].startswith("semantic:") for r in rows)
    ]
    if not datasets:
        return False
    fig = Figure(figsize=(6 * len(datasets), 4.2))
    axes = fig.subplots(1, len(datasets), squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        mine = {r["system"]: r for r in rows if r["dataset"] == dataset}
        sweep = sorted(
            (float(name.split(":", 1)[1]), row) for name, row in mine.items() if name.startswith("semantic:")
        )
        xs = [t for t, _ in sweep]
        ax.plot(xs, [row["forget_after"] for _, row in sweep], "o-", color="tab:red", label="semantic: forget")
        ax.plot(xs, [row["retain_after"] for _, row in sweep], "s-", color="tab:blue", label="semantic: retain")
        for system, style in (("dellm", "-"), ("no_memory", ":")):
            row = mine.get(system)
            if row is None:
                continue
            ax.axhline(row["forget_after"], color="tab:red", linestyle=style, alpha=0.6, label=f"{system}: forget")
            ax.axhline(row["retain_after"], color="tab:blue", linestyle=style, alpha=0.6, label=f"{system}: retain")
        ax.set_title(f"{dataset.upper()}: utility after deletion")
        ax.set_xlabel("semantic deletion threshold t (cosine)")
        ax.set_ylabel("utility (%)")
        ax.set_ylim(-3, 103)
        ax.set_xticks(xs)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def report_write(
    *,
    out: Path,
    meta: dict,
    rows: list[dict],
    checks: list[dict],
    records: list[dict],
    notes: str,
    memory: dict | None = None,
    extraction: dict | None = None,
) -> dict:
    """Write `results.json`, `report.md` and `thresholds.png` into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "report": out / "report.md", "plot": out / "thresholds.png"}
    payload = {"meta": meta, "summary": rows, "relations": checks, "answers": records}
    if memory is not None:
        payload["memory"] = memory["records"]
    if extraction is not None:
        payload["extraction"] = extraction["rows"]
    paths["json"].write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    has_plot = plot_thresholds(rows, paths["plot"])
    if not has_plot:
        paths.pop("plot")
    relation_lines = [
        f"- [{'x' if c['holds'] else ' '}] {c['dataset']}: {c['relation']} ({c['detail']})" for c in checks
    ]
    parts = [
        "# DeLLM evaluation",
        _meta_markdown(meta),
        tables_markdown(rows),
        "## Expected relations",
        "\n".join(relation_lines) or "(no relation applies to the systems run)",
    ]
    if memory is not None:
        parts.append(memory["markdown"])
    if extraction is not None:
        parts.append(extraction["markdown"])
    if has_plot:
        parts.append("## Semantic deletion across thresholds (paper Figure 8)\n\n![thresholds](thresholds.png)")
    if notes:
        parts.append(notes)
    paths["report"].write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return paths


def _meta_markdown(meta: dict) -> str:
    scoring = (
        "LLM judge (MemGPT-style prompt)"
        if meta["judge"]
        else f"offline: an answer is correct when its ROUGE-L recall of the gold answer is >= {HIT_RECALL}"
    )
    lines = [
        f"- command: `{meta['command']}`",
        f"- responder: {meta['responder']}; embedder: {meta['embedder']}",
        f"- correctness: {scoring}",
        f"- datasets: {meta['datasets']}",
        f"- run time: {meta['seconds']:.0f} s",
    ]
    return "\n".join(lines)
