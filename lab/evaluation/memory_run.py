"""Runs the CM benchmark through `chat.retrieval.context.context_retrieve`, exactly as a turn calls it.

Each conversation goes into a throwaway `eval-` user (a thread per session,
messages embedded with the embedder under test), then each question is
stored as a user message in a thread of its own, as a turn stores it, and
its context is read with every policy. Questions stay in the history, so a
later question competes with earlier ones, as in a real chat. Only ids,
ranks and counts are recorded, never text.
"""

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import override_settings

from chat.facts.extract import facts_extract_pass
from chat.index.embeddings import Embedder
from chat.models import Thread
from chat.retrieval.context import context_retrieve
from chat.retrieval.neighbours import NEIGHBOURS
from chat.writer import Branch, Supplied, message_store, transcripts_store
from chat.writer.vectors import messages_index_embed
from lab.evaluation.memory import Conversation
from lab.evaluation.systems import USERNAME_PREFIX
from provenance.dependents import dep_ids

POLICIES = ("vector", "lexical", "relevant", "window")
KS = (1, 3, 5, 10)
# The neighbour modes measured (chat/retrieval/neighbours.py, NEIGHBOURS) with each relevance policy.
NEIGHBOUR_SWEEP = ("none", "question", "next", "both", "fill")
NEIGHBOUR_POLICIES = ("vector", "lexical", "relevant")
# How facts are used in the product's policy (chat/retrieval/facts.py, DELLM_FACTS_CONTEXT).
FACT_MODES = ("beside", "replace")
# The context sizes at which a deletion's cascade is counted (the product's DELLM_CONTEXT_K is 5).
DEP_KS = (5, 10)


@dataclass(frozen=True)
class Setting:
    """One retrieval configuration under test."""

    embedder: str
    policy: str
    threshold: float
    lexical_floor: float | None = None
    neighbours: str = "none"
    # Facts drawn from the history (chat/facts/) and used as DELLM_FACTS_CONTEXT says: "beside" or "replace";
    # "" for none drawn.
    facts: str = ""

    @property
    def label(self) -> str:
        label = self.policy if self.neighbours == "none" else f"{self.policy}+{self.neighbours}"
        return f"{label}+facts:{self.facts}" if self.facts else label


def _store(*, owner, conversation: Conversation, embedder: Embedder) -> dict[str, int]:
    """Store the history through the one writer, a thread per session; returns {fact key: message id}.

    Then each message's index text is embedded by the embedder under test, as the doors do (chat/writer/vectors.py).
    """
    branches, keys = [], []
    for number, session in enumerate(conversation.sessions, 1):
        date = conversation.dates[number - 1] if conversation.dates else None
        title = f"session {number}" + (f", {date:%d %B %Y}" if date else "")
        thread = Thread.objects.create(owner=owner, title=title)
        items = [
            Supplied(
                role=t.role,
                content=t.text,
                # A minute a turn from the session's start.
                source_created_at=date + datetime.timedelta(minutes=i) if date else None,
            )
            for i, t in enumerate(session)
        ]
        branches.append(Branch(thread_id=thread.pk, items=items))
        keys += [turn.key for turn in session]
    # Nothing is removed in a fresh history, so every message lands, in order.
    created = transcripts_store(owner_id=owner.pk, branches=branches).created
    messages_index_embed(
        owner_id=owner.pk,
        ids=[m.pk for m in created],
        embedder=embedder,
        model=getattr(embedder, "model_name", ""),
        missing_only=False,
    )
    return {key: message.pk for key, message in zip(keys, created, strict=True) if key}


def conversation_run(
    *,
    conversation: Conversation,
    embedder_name: str,
    embedder: Embedder,
    settings_list: list[Setting],
    run_id: str,
    k: int = max(KS),
) -> list[dict]:
    """One record per (question, setting): evidence ranks in the context, context size, cascade, latency.

    The settings with facts run on a second copy of the history whose facts were drawn first (the
    others never see a fact): a fact in a context counts for the messages it was drawn from.
    """
    plain = [setting for setting in settings_list if not setting.facts]
    with_facts = [setting for setting in settings_list if setting.facts]
    records = []
    for chosen, facts in ((plain, False), (with_facts, True)):
        if chosen:
            records += _history_run(
                conversation=conversation,
                name=f"{run_id}-cm-{conversation.key}-{embedder_name}" + ("-facts" if facts else ""),
                embedder=embedder,
                settings_list=chosen,
                facts=facts,
                k=k,
            )
    return records


def _history_run(
    *, conversation: Conversation, name: str, embedder: Embedder, settings_list: list[Setting], facts: bool, k: int
) -> list[dict]:
    owner = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{name}")
    records = []
    try:
        keyed = _store(owner=owner, conversation=conversation, embedder=embedder)
        while facts and facts_extract_pass(owner_id=owner.pk).more:
            pass
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE chat_message (id, owner_id, status, seq)")
        # Per setting, each question's context (ids, most relevant first): the edges its reply would get.
        contexts: dict[Setting, list[list[int]]] = {setting: [] for setting in settings_list}
        for number, question in enumerate(conversation.questions):
            thread = Thread.objects.create(owner=owner, title=f"question {number}")
            message = message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content=question.text)
            # Its index text, as a turn embeds its user message (`chat.writer.vectors.message_index_embed`).
            messages_index_embed(
                owner_id=owner.pk, ids=[message.pk], embedder=embedder, model=getattr(embedder, "model_name", "")
            )
            message.refresh_from_db(fields=["embedding", "embedding_model"])
            evidence = [keyed[key] for key in question.evidence]
            for setting in settings_list:
                start = time.perf_counter()
                with override_settings(DELLM_FACTS_CONTEXT=setting.facts or "replace"):
                    items = context_retrieve(
                        message=message,
                        policy=setting.policy,
                        k=k,
                        threshold=setting.threshold,
                        window=k,
                        lexical_floor=setting.lexical_floor,
                        neighbours=setting.neighbours,
                    )
                ms = (time.perf_counter() - start) * 1000
                ids = [item.id for item in items]
                # A fact stands for the messages it was drawn from: each counts at the fact's rank.
                stands = [{item.id, *item.sources} for item in items]
                contexts[setting].append(ids)
                records.append(
                    {
                        "conversation": conversation.key,
                        "question": number,
                        "kind": question.kind,
                        "embedder": setting.embedder,
                        "policy": setting.label,
                        "threshold": setting.threshold,
                        "lexical_floor": setting.lexical_floor,
                        "evidence_ranks": [
                            next((rank for rank, held in enumerate(stands, 1) if e in held), None) for e in evidence
                        ],
                        "facts": sum(1 for item in items if item.role == "fact"),
                        "evidence": len(evidence),
                        "context": len(ids),
                        "signals": [item.signal for item in items],
                        "ms": ms,
                        "evidence_ids": evidence,
                    }
                )
        cascades = _cascades(
            owner_id=owner.pk, contexts=contexts, evidence=[keyed[key] for key in _evidence(conversation)]
        )
        for record in records:
            ids = record.pop("evidence_ids")
            setting_cascades = cascades[record["policy"]]
            for dep_k in DEP_KS:
                record[f"dep@{dep_k}"] = [setting_cascades[dep_k][e] for e in ids]
    finally:
        with transaction.atomic():
            get_user_model().objects.filter(pk=owner.pk).delete()
    return records


def _evidence(conversation: Conversation) -> list[str]:
    return sorted({key for question in conversation.questions for key in question.evidence})


def cascade_sizes(*, history: dict[int, set[int]], contexts: list[list[int]], k: int) -> dict[int, int]:
    """{evidence id: |Dep|}: what deleting each evidence message would take with it, at context size k.

    `history` is Dep(e) in the stored history (e and the chain replies that
    derive from it); to it come the replies to every question whose first k
    context items hold one of those messages, each context item being an edge
    of its reply. Replies are not stored by the benchmark, so a reply's own
    dependents are not counted: this is a policy's first hop.
    """
    return {e: len(dep) + sum(1 for ids in contexts if not dep.isdisjoint(ids[:k])) for e, dep in history.items()}


def _cascades(
    *, owner_id: int, contexts: dict[Setting, list[list[int]]], evidence: list[int]
) -> dict[str, dict[int, dict[int, int]]]:
    """{setting label: {k: {evidence id: |Dep|}}}, Dep in the history through `provenance.dependents.dep_ids`."""
    history = {e: dep_ids(owner_id=owner_id, roots=[e]) for e in evidence}
    return {
        setting.label: {k: cascade_sizes(history=history, contexts=per_question, k=k) for k in DEP_KS}
        for setting, per_question in contexts.items()
    }


def summarize(records: list[dict], key: Callable[[dict], tuple]) -> list[dict]:
    """Evidence recall@k, MRR and the no-answer context size, grouped by `key`."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    rows = []
    for group, items in groups.items():
        answerable = [r for r in items if r["evidence"]]
        unanswerable = [r for r in items if not r["evidence"]]
        row: dict = {"group": group, "questions": len(answerable), "no_answer": len(unanswerable)}
        for k in KS:
            row[f"recall@{k}"] = (
                sum(sum(1 for rank in r["evidence_ranks"] if rank and rank <= k) / r["evidence"] for r in answerable)
                / len(answerable)
                if answerable
                else 0.0
            )
        row["mrr"] = (
            sum(1 / min((rank for rank in r["evidence_ranks"] if rank), default=float("inf")) for r in answerable)
            / len(answerable)
            if answerable
            else 0.0
        )
        # What got into the top-5 of a question that nothing answers (all unrelated).
        row["unrelated@5_no_answer"] = (
            sum(min(r["context"], 5) for r in unanswerable) / len(unanswerable) if unanswerable else 0.0
        )
        for dep_k in DEP_KS:
            deps = [d for r in answerable for d in r.get(f"dep@{dep_k}", [])]
            row[f"dep@{dep_k}"] = sum(deps) / len(deps) if deps else 0.0
        ms = sorted(r["ms"] for r in items)
        row["p50_ms"] = ms[len(ms) // 2]
        row["p95_ms"] = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        rows.append(row)
    return rows


def embedders_available() -> dict[str, Embedder]:
    """The embedders measured: the configured one (offline by default)."""
    from chat.index.embeddings import get_embedder

    found: dict[str, Embedder] = {}
    embedder = get_embedder()
    found[embedder.model_name] = embedder
    return found


def memory_evaluate(
    *,
    conversations: list[Conversation],
    embedders: dict[str, Embedder],
    threshold: float,
    run_id: str,
    tick: Callable[[], object] = lambda: None,
) -> list[dict]:
    """Every conversation under every embedder and policy, at the configured thresholds."""
    records: list[dict] = []
    for name, embedder in embedders.items():
        settings_list = [Setting(embedder=name, policy=policy, threshold=threshold) for policy in POLICIES]
        settings_list += [
            Setting(embedder=name, policy=policy, threshold=threshold, neighbours=mode)
            for policy in NEIGHBOUR_POLICIES
            for mode in NEIGHBOUR_SWEEP
            if mode != "none" and (policy == "relevant" or mode == "question")
        ]
        # The product's policy with facts, beside their sources or in their place (DELLM_FACTS_CONTEXT).
        settings_list += [
            Setting(embedder=name, policy="relevant", threshold=threshold, neighbours=NEIGHBOURS, facts=mode)
            for mode in FACT_MODES
        ]
        for conversation in conversations:
            records += conversation_run(
                conversation=conversation,
                embedder_name=name.replace("-", "")[:20],
                embedder=embedder,
                settings_list=settings_list,
                run_id=run_id,
            )
            tick()
    return records


def data_name(record: dict) -> str:
    """The data set a record's conversation belongs to: CM, DIA or TOFU."""
    key = record["conversation"]
    return "TOFU" if key == "tofu" else "DIA" if key.startswith("dia") else "CM"


DATA_ORDER = ("CM", "DIA", "TOFU")


def _policy_order(label: str) -> tuple[int, int, str]:
    plain, _, facts = label.partition("+facts:")
    policy, _, mode = plain.partition("+")
    return (POLICIES.index(policy), NEIGHBOUR_SWEEP.index(mode or "none") + (10 if facts else 0), label)


def memory_markdown(*, records: list[dict], datasets: dict[str, str]) -> str:
    """The report section: recall@k, MRR and |Dep| per data set, embedder and policy, then per question kind."""
    header = "| data | embedder | policy | questions | " + " | ".join(f"recall@{k}" for k in KS)
    header += " | MRR | mean \\|Dep\\| k=5 | k=10 | no-answer questions: messages in top-5 | p50 ms |\n|"
    header += "---|" * (9 + len(KS))
    lines = [header]
    rows = summarize(records, lambda r: (DATA_ORDER.index(data_name(r)), r["embedder"], _policy_order(r["policy"])))
    for row in sorted(rows, key=lambda r: r["group"]):
        data, embedder, (_, _, label) = row["group"]
        recalls = " | ".join(f"{row[f'recall@{k}']:.3f}" for k in KS)
        unrelated = f"{row['unrelated@5_no_answer']:.2f} (n={row['no_answer']})" if row["no_answer"] else "—"
        lines.append(
            f"| {DATA_ORDER[data]} | {embedder} | {label} | {row['questions']} | {recalls} | {row['mrr']:.3f} "
            f"| {row['dep@5']:.1f} | {row['dep@10']:.1f} | {unrelated} | {row['p50_ms']:.1f} |"
        )
    kinds = summarize(
        [r for r in records if data_name(r) != "TOFU"],
        lambda r: (DATA_ORDER.index(data_name(r)), r["embedder"], r["kind"], _policy_order(r["policy"])),
    )
    kind_lines = [
        "| data | embedder | kind | policy | questions | recall@5 | recall@10 | MRR | mean \\|Dep\\| k=5 |\n|"
        + "---|" * 9
    ]
    for row in sorted(kinds, key=lambda r: r["group"]):
        data, embedder, kind, (_, _, label) = row["group"]
        if not row["questions"]:
            continue
        kind_lines.append(
            f"| {DATA_ORDER[data]} | {embedder} | {kind} | {label} | {row['questions']} | {row['recall@5']:.3f} "
            f"| {row['recall@10']:.3f} | {row['mrr']:.3f} | {row['dep@5']:.1f} |"
        )
    return "\n\n".join(
        [
            "## Conversational memory (CM, DIA): evidence retrieval",
            "Through `chat.retrieval.context.context_retrieve` exactly as a turn calls it: each question is stored "
            "as a user message (questions stay in the history) and its context read with each policy at the configured "
            "thresholds; recall@k is the share of a question's evidence messages in its top k, MRR the mean "
            "reciprocal rank of the first one. `vector` = similarity only, `lexical` = full text only, "
            "`relevant` = both fused, `window` = the last k messages; `+question`, `+next`, `+both`, `+fill` "
            "share the k slots with the matches' neighbours (chat/retrieval/neighbours.py, NEIGHBOURS; a policy "
            f"without one has none; the product's default is `relevant+{NEIGHBOURS}`). `+facts:beside` and "
            "`+facts:replace` run on a copy of the history whose facts were drawn first (chat/facts/): facts beside "
            "their sources, or in their place (DELLM_FACTS_CONTEXT); a fact in a context counts for the messages it "
            "was drawn from. Mean |Dep|: the "
            "messages a deletion of one evidence message would remove, its history's dependents plus the replies "
            "whose first k context items hold one of them (every context item is an edge). Data: "
            + "; ".join(f"{name}: {text}" for name, text in datasets.items())
            + ".",
            "\n".join(lines),
            "By question kind (CM and DIA):",
            "\n".join(kind_lines),
        ]
    )
