"""Runs the CM benchmark through `chat.selectors.context_retrieve`, exactly as a turn calls it.

Each conversation goes into a throwaway `eval-` user (a thread per session,
messages embedded with the embedder under test), then each question is
stored as a user message in a thread of its own, as a turn stores it, and
its context is read with every policy. Questions stay in the history, so a
later question competes with earlier ones, as in a real chat. Only ids,
ranks and counts are recorded, never text.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from chat.embeddings import Embedder
from chat.indexing import messages_index_embed
from chat.models import Thread
from chat.selectors import context_retrieve
from chat.writer import Branch, Supplied, message_store, transcripts_store
from lab.evaluation.memory import Conversation
from lab.evaluation.systems import USERNAME_PREFIX

POLICIES = ("vector", "lexical", "relevant")
KS = (1, 3, 5, 10)


@dataclass(frozen=True)
class Setting:
    """One retrieval configuration under test."""

    embedder: str
    policy: str
    threshold: float
    lexical_floor: float | None = None


def _store(*, owner, conversation: Conversation, embedder: Embedder) -> dict[str, int]:
    """Store the history through the one writer, a thread per session; returns {fact key: message id}.

    Then each message's index text is embedded by the embedder under test, as the doors do (chat/indexing.py).
    """
    branches, keys = [], []
    for number, session in enumerate(conversation.sessions, 1):
        thread = Thread.objects.create(owner=owner, title=f"session {number}")
        items = [Supplied(role=t.role, content=t.text) for t in session]
        branches.append(Branch(thread_id=thread.pk, items=items))
        keys += [turn.key for turn in session]
    # Nothing is removed in a fresh history, so every message lands, in order.
    created = transcripts_store(owner_id=owner.pk, branches=branches).created
    messages_index_embed(
        ids=[m.pk for m in created], embedder=embedder, model=getattr(embedder, "model_name", ""), missing_only=False
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
    """One record per (question, setting): evidence ranks in the context, context size, latency."""
    owner = get_user_model().objects.create_user(
        username=f"{USERNAME_PREFIX}{run_id}-cm-{conversation.key}-{embedder_name}"
    )
    records = []
    try:
        facts = _store(owner=owner, conversation=conversation, embedder=embedder)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE chat_message (id, owner_id, status, seq)")
        for number, question in enumerate(conversation.questions):
            thread = Thread.objects.create(owner=owner, title=f"question {number}")
            message = message_store(owner_id=owner.pk, thread_id=thread.pk, role="user", content=question.text)
            # Its index text, as a turn embeds its user message (`chat.services.message_embed`).
            messages_index_embed(ids=[message.pk], embedder=embedder, model=getattr(embedder, "model_name", ""))
            message.refresh_from_db(fields=["embedding", "embedding_model"])
            evidence = [facts[key] for key in question.evidence]
            for setting in settings_list:
                start = time.perf_counter()
                items = context_retrieve(
                    message=message,
                    policy=setting.policy,
                    k=k,
                    threshold=setting.threshold,
                    window=0,
                    lexical_floor=setting.lexical_floor,
                )
                ms = (time.perf_counter() - start) * 1000
                ids = [item.id for item in items]
                records.append(
                    {
                        "conversation": conversation.key,
                        "question": number,
                        "kind": question.kind,
                        "embedder": setting.embedder,
                        "policy": setting.policy,
                        "threshold": setting.threshold,
                        "lexical_floor": setting.lexical_floor,
                        "evidence_ranks": [ids.index(e) + 1 if e in ids else None for e in evidence],
                        "evidence": len(evidence),
                        "context": len(ids),
                        "signals": [item.signal for item in items],
                        "ms": ms,
                    }
                )
    finally:
        with transaction.atomic():
            get_user_model().objects.filter(pk=owner.pk).delete()
    return records


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
        ms = sorted(r["ms"] for r in items)
        row["p50_ms"] = ms[len(ms) // 2]
        row["p95_ms"] = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        rows.append(row)
    return rows


def embedders_available() -> dict[str, Embedder]:
    """The embedders measured: the configured one (offline by default)."""
    from chat.embeddings import get_embedder

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


def memory_markdown(*, records: list[dict], datasets: dict[str, str]) -> str:
    """The report section: recall@k and MRR per dataset, embedder and policy; what gets in for no-answer questions."""
    header = "| data | embedder | policy | questions | " + " | ".join(f"recall@{k}" for k in KS)
    header += " | MRR | no-answer questions: messages in top-5 | p50 ms |\n|" + "---|" * (7 + len(KS))
    lines = [header]
    rows = summarize(records, lambda r: (r["conversation"] == "tofu", r["embedder"], POLICIES.index(r["policy"])))
    for row in sorted(rows, key=lambda r: r["group"]):
        is_tofu, embedder, policy = row["group"]
        recalls = " | ".join(f"{row[f'recall@{k}']:.3f}" for k in KS)
        unrelated = f"{row['unrelated@5_no_answer']:.2f} (n={row['no_answer']})" if row["no_answer"] else "—"
        lines.append(
            f"| {'TOFU' if is_tofu else 'CM'} | {embedder} | {POLICIES[policy]} | {row['questions']} | {recalls} "
            f"| {row['mrr']:.3f} | {unrelated} | {row['p50_ms']:.1f} |"
        )
    kinds = summarize(
        [r for r in records if r["conversation"] != "tofu"],
        lambda r: (r["embedder"], POLICIES.index(r["policy"]), r["kind"]),
    )
    by_kind: dict[tuple, dict[str, float]] = {}
    for row in kinds:
        embedder, policy, kind = row["group"]
        by_kind.setdefault((embedder, policy), {})[kind] = row["recall@5"]
    kind_names = ("anchored", "paraphrase", "indirect", "updated")
    kind_lines = [
        "| embedder | policy | " + " | ".join(kind_names) + " |\n|" + "---|" * (2 + len(kind_names)),
        *(
            f"| {embedder} | {POLICIES[policy]} | "
            + " | ".join(f"{values.get(kind, 0.0):.2f}" for kind in kind_names)
            + " |"
            for (embedder, policy), values in sorted(by_kind.items())
        ),
    ]
    return "\n\n".join(
        [
            "## Conversational memory (CM): evidence retrieval",
            "Through `chat.selectors.context_retrieve` exactly as a turn calls it: each question is stored as a user "
            "message (questions stay in the history) and its context read with each policy at the configured "
            "thresholds; recall@k is the share of a question's evidence messages in its top k, MRR the mean "
            "reciprocal rank of the first one. `vector` = similarity only, `lexical` = full text only, "
            "`relevant` = both fused (the default). Data: "
            + "; ".join(f"{name}: {text}" for name, text in datasets.items())
            + ".",
            "\n".join(lines),
            "CM recall@5 by question kind:",
            "\n".join(kind_lines),
        ]
    )
