"""A message's index carries its conversational context, and forgets with it (chat/index/context.py).

Each deletion test builds the same conversation twice: once with message A,
once (a twin owner) as if A had never been said. After A is purged,
soft-deleted or redacted, every live message's search vector and vector must
equal its twin's, and A's words must be nowhere in the database's dump.
"""

import importlib
import json
import re
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.imports.formats import parse_file
from chat.imports.history import history_import
from chat.index.context import (
    INDEX_CONTEXT_WORDS,
    INDEX_ROWS_SQL,
    holding_sql,
    index_dependents,
    index_params,
    index_rows,
    lookup_cursor,
)
from chat.index.embeddings import get_embedder
from chat.models import Message
from chat.turns.start import message_create
from chat.writer import Branch, Supplied, message_rewrite, messages_remove, messages_restore, transcripts_store, vectors
from chat.writer.vectors import messages_index_embed
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.deletions.undo import deletion_undo
from tests.factories import make_thread, make_user
from tests.helpers import pg_dump

# A's words: found nowhere else in the conversation.
SECRET = "My cousin Quetzalcoatl collects marzipan gargoyles"
BEFORE = "We finally went to the harbour festival on Saturday"
AFTER = "Yeah, it was amazing!"
LATER = "The fireworks lasted an hour"


def typed(owner, texts: list[tuple[str, str]]) -> list[Message]:
    """A conversation typed in one thread, stored and embedded as the doors do."""
    thread = make_thread(owner)
    made = [message_create(thread=thread, role=role, content=text) for role, text in texts]
    messages_index_embed(owner_id=owner.pk, ids=[m.pk for m in made])
    return made


def conversation(with_secret: bool = True) -> list[tuple[str, str]]:
    return [("user", BEFORE), *([("user", SECRET)] if with_secret else []), ("assistant", AFTER), ("user", LATER)]


def index(message_id: int) -> tuple[str, list[float] | None, list[int]]:
    row = Message.objects.values_list("search", "embedding", "index_sources").get(pk=message_id)
    return str(row[0]), None if row[1] is None else list(row[1]), list(row[2])


def without_sources(message_id: int) -> tuple[str, list[float] | None]:
    search, vector, _ = index(message_id)
    return search, vector


def confirm(owner, **select):
    preview = deletion_preview(owner=owner, actor=owner, **select)
    return deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)


def test_an_index_holds_the_previous_turn_speaker_and_date_and_records_its_source(owner):
    before, secret, after, _ = typed(owner, conversation())
    rows = {row.id: row for row in index_rows(owner_id=owner.pk, ids=[before.pk, after.pk])}
    date = f"{after.created_at.day} {after.created_at:%B %Y}"
    assert rows[after.pk].context == f"assistant {date} {SECRET}"
    assert rows[before.pk].context == f"user {date}"
    assert Message.objects.get(pk=after.pk).content == AFTER
    assert index(after.pk)[2] == [secret.pk]
    # Own words weigh 'A', the context 'B'.
    assert re.search(r"'amaz':\d+A", index(after.pk)[0])
    assert re.search(r"'quetzalcoatl':\d+B", index(after.pk)[0])


def test_the_context_is_the_first_words_of_the_previous_turn(owner):
    long = " ".join(f"word{i}" for i in range(INDEX_CONTEXT_WORDS + 10))
    _, reply = typed(owner, [("user", long), ("assistant", "Sure.")])
    context = index_rows(owner_id=owner.pk, ids=[reply.pk])[0].context
    assert context.endswith(f"word{INDEX_CONTEXT_WORDS - 1}")
    assert f"word{INDEX_CONTEXT_WORDS}" not in context.split()


class _Spy:
    """The configured embedder, recording each call's texts; `during` runs inside the first call."""

    def __init__(self, during=lambda: None) -> None:
        self.inner, self.calls, self.during = get_embedder(), [], during
        self.model_name, self.local = self.inner.model_name, self.inner.local

    def embed(self, texts):
        self.calls.append([len(text) for text in texts])
        self.during, during = (lambda: None), self.during
        during()
        return self.inner.embed(texts)


def test_long_messages_are_embedded_in_batches_of_bounded_text(owner, monkeypatch):
    """A batch of 256 imported messages of 96,000 characters was 25 M characters held at once."""
    monkeypatch.setattr(vectors, "EMBED_CHARS", 25_000)
    thread = make_thread(owner)
    made = [message_create(thread=thread, role="user", content=f"{n} " + "word " * 2_000) for n in range(5)]
    spy = _Spy()
    assert messages_index_embed(owner_id=owner.pk, ids=[m.pk for m in made], embedder=spy) == 5
    # 10,002 characters each: two a batch.
    assert [len(call) for call in spy.calls] == [2, 2, 1]
    assert all(m.embedding is not None for m in Message.objects.filter(pk__in=[m.pk for m in made]))


def test_a_vector_of_a_text_changed_while_it_was_embedded_is_not_stored(owner):
    (message,) = typed(owner, [("user", BEFORE)])
    Message.objects.filter(pk=message.pk).update(embedding=None)
    spy = _Spy(during=lambda: Message.objects.filter(pk=message.pk).update(content=LATER))
    assert messages_index_embed(owner_id=owner.pk, ids=[message.pk], embedder=spy) == 0
    assert Message.objects.get(pk=message.pk).embedding is None
    assert messages_index_embed(owner_id=owner.pk, ids=[message.pk]) == 1


def test_a_message_in_hand_is_embedded_by_one_statement_and_not_read_back(owner):
    thread = make_thread(owner)
    message = Message.objects.get(pk=message_create(thread=thread, role="user", content=BEFORE).pk)
    with CaptureQueriesContext(connection) as queries:
        assert vectors.message_index_embed(message) is message
    assert [query["sql"].split()[0] for query in queries.captured_queries] == ["UPDATE"]
    assert message.embedding == pytest.approx(get_embedder().embed([BEFORE])[0])
    assert index(message.pk)[1] == pytest.approx(message.embedding)


def test_a_message_in_hand_whose_index_changed_meanwhile_keeps_no_stale_vector(owner):
    thread = make_thread(owner)
    first, second = (message_create(thread=thread, role="user", content=text) for text in (BEFORE, AFTER))
    message = Message.objects.get(pk=second.pk)
    assert message.index_sources == [first.pk]
    # A write after the row was read: its index is now built from no previous turn.
    Message.objects.filter(pk=message.pk).update(index_sources=[])
    now = vectors.message_index_embed(message)
    assert (now.embedding, now.index_sources) == (None, [])
    assert index(message.pk)[1] is None
    assert vectors.message_index_embed(now) is now
    assert index(message.pk)[1] == pytest.approx(get_embedder().embed([AFTER])[0])
    # A message gone meanwhile (its owner's account deleted): None, not an error.
    gone = Message.objects.get(pk=first.pk)
    Message.objects.filter(pk=first.pk).delete()
    assert vectors.message_index_embed(gone) is None


@pytest.mark.django_db(transaction=True)
def test_purge_leaves_every_neighbour_index_as_if_never_said_and_no_word_in_pg_dump(owner):
    before, secret, after, later = typed(owner, conversation())
    twin = typed(make_user(), conversation(with_secret=False))
    assert "quetzalcoatl" in pg_dump().lower()  # the neighbour's index holds A's words: the test can see them

    deletion = confirm(owner, mode="purge", ids=[secret.pk])

    assert deletion.receipt["checks"]["indexes"] == {"passed": True, "recomputed": 1, "stale": []}
    for mine, theirs in zip([before, after, later], twin, strict=True):
        assert without_sources(mine.pk) == without_sources(theirs.pk)
    assert index(after.pk)[2] == [before.pk]
    dump = pg_dump().lower()
    assert "quetzalcoatl" not in dump
    assert "marzipan" not in dump
    assert "harbour festival" in dump


def test_soft_delete_takes_the_words_out_of_the_neighbour_and_undo_puts_them_back(owner):
    before, secret, after, later = typed(owner, conversation())
    twin = typed(make_user(), conversation(with_secret=False))
    original = {m.pk: index(m.pk) for m in (before, after, later)}

    deletion = confirm(owner, mode="soft", ids=[secret.pk])

    assert deletion.receipt["checks"]["indexes"]["recomputed"] == 1
    for mine, theirs in zip([before, after, later], twin, strict=True):
        assert without_sources(mine.pk) == without_sources(theirs.pk)
    assert "quetzalcoatl" not in index(after.pk)[0]

    deletion_undo(deletion_id=deletion.pk, owner_id=owner.pk)
    assert {m.pk: index(m.pk) for m in (before, after, later)} == original


def test_redaction_rebuilds_the_neighbour_from_the_approved_text(owner):
    redacted = "My cousin collects sweets"
    before, secret, after, later = typed(owner, conversation())
    twin = typed(make_user(), [("user", BEFORE), ("user", redacted), ("assistant", AFTER), ("user", LATER)])

    preview = deletion_preview(owner=owner, actor=owner, mode="purge", exact="Quetzalcoatl")
    deletion = deletion_confirm(
        deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, redactions={str(secret.pk): redacted}
    )

    replacement = int(deletion.redacted[str(secret.pk)])
    assert index(after.pk)[2] == [replacement]
    assert without_sources(replacement) == without_sources(twin[1].pk)
    for mine, theirs in zip([before, after, later], [twin[0], twin[2], twin[3]], strict=True):
        assert without_sources(mine.pk) == without_sources(theirs.pk)
    assert deletion.receipt["checks"]["indexes"]["passed"] is True


def test_an_import_gets_the_same_index_as_the_typed_chat(owner):
    chat = typed(owner, conversation())
    other = make_user()
    lines = [
        json.dumps(
            {
                "conversation": "festival",
                "role": message.role,
                "content": message.content,
                "created_at": message.created_at.isoformat(),
                "id": f"m{number}",
            }
        )
        for number, message in enumerate(chat)
    ]
    history_import(owner_id=other.pk, parsed=parse_file("\n".join(lines).encode()))
    imported = list(Message.objects.filter(owner=other).order_by("seq"))
    assert [m.content for m in imported] == [m.content for m in chat]
    for mine, theirs in zip(chat, imported, strict=True):
        assert without_sources(mine.pk) == without_sources(theirs.pk)


# --- Property: random threads, random deletions, against a reference model -------------------

ROLES = ["user", "assistant", "system"]


def reference_sources(thread_id: int) -> dict[int, list[int]]:
    """Each not-purged message's previous live memory turn, by walking the thread in Python."""
    rows = list(Message.objects.filter(thread_id=thread_id).values("pk", "seq", "place", "role", "status", "content"))
    rows.sort(key=lambda r: (r["place"] or r["seq"], r["seq"]))
    expected, last = {}, None
    for row in rows:
        memory = row["role"] != "system" and row["content"] != ""
        if row["status"] != "purged":
            expected[row["pk"]] = [last] if memory and last is not None else []
        if memory and row["status"] in ("active", "expiring"):
            last = row["pk"]
    return expected


@st.composite
def histories(draw):
    roles = draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=8))
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(["soft", "purge", "restore", "redact"]), st.integers(0, len(roles) - 1)),
            max_size=6,
        )
    )
    return roles, steps


def test_a_restore_gives_back_the_previous_turn_of_the_removed_messages_after_it_too(owner):
    """Hypothesis found it: B and C removed (C first), then B restored; C, still removed, was built from B again."""
    first, second, third = typed(owner, [("user", BEFORE), ("assistant", AFTER), ("user", LATER)])
    for number, message in enumerate([third, second], start=1):
        messages_remove(owner_id=owner.pk, ids=[message.pk], deletion_id=number, purge=False)
    assert index(third.pk)[2] == [first.pk]
    messages_restore(owner_id=owner.pk, ids=[second.pk], deletion_id=2)
    assert index(third.pk)[2] == [second.pk]
    assert index(third.pk)[0] == without_sources(typed(make_user(), conversation(with_secret=False))[2].pk)[0]


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_every_index_is_built_from_live_turns_and_equals_a_reference_recomputation(history):
    roles, steps = history
    owner = make_user()
    thread = make_thread(owner)
    made = [message_create(thread=thread, role=role, content=f"turn{i} word{i}") for i, role in enumerate(roles)]
    deletions_by_message: dict[int, int] = {}
    for number, (action, index_) in enumerate(steps, start=1):
        target = made[index_].pk
        if action == "restore":
            if target in deletions_by_message:
                messages_restore(owner_id=owner.pk, ids=[target], deletion_id=deletions_by_message.pop(target))
        elif action == "redact":
            # A rewrite shown in the original's place, then the original removed (as a redaction does).
            original = Message.objects.get(pk=target)
            if original.is_live:
                made.append(message_rewrite(original=original, content=f"rewrite{number} of {index_}", embedding=None))
                messages_remove(owner_id=owner.pk, ids=[target], deletion_id=number, purge=True)
        else:
            messages_remove(owner_id=owner.pk, ids=[target], deletion_id=number, purge=action == "purge")
            status = Message.objects.get(pk=target).status
            if status == "deleted":
                deletions_by_message.setdefault(target, number)
            else:
                deletions_by_message.pop(target, None)
    stored = dict(Message.objects.filter(thread=thread).exclude(status="purged").values_list("pk", "index_sources"))
    assert {pk: list(sources) for pk, sources in stored.items()} == reference_sources(thread.pk)
    live = set(Message.objects.filter(thread=thread, status__in=Message.LIVE).values_list("pk", flat=True))
    assert all(set(stored[pk]) <= live for pk in live)
    # The search vector too: the writer's equals one built now from the reference's previous turn.
    for pk, sources in reference_sources(thread.pk).items():
        message = Message.objects.get(pk=pk)
        context = ""
        if message.role != "system":
            date = f"{message.created_at.day} {message.created_at:%B %Y}"
            words = Message.objects.get(pk=sources[0]).content.split()[:INDEX_CONTEXT_WORDS] if sources else []
            context = " ".join([message.role, date, *words])
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT setweight(to_tsvector('english', %s), 'A') || setweight(to_tsvector('english', %s), 'B')",
                [message.content, context],
            )
            assert message.search == cursor.fetchone()[0]


def test_the_data_migration_computes_the_same_index_as_the_writer(owner):
    """Migration 0014's frozen copy of the index, run over rows the writer indexed, changes none of them."""
    migration = importlib.import_module("chat.migrations.0014_index_recompute")
    made = typed(owner, conversation())
    rewrite = message_rewrite(original=made[1], content="A quieter cousin", embedding=None)
    messages_remove(owner_id=owner.pk, ids=[made[1].pk], deletion_id=1, purge=True)
    rows = Message.objects.filter(owner=owner).order_by("pk")
    before = list(rows.values_list("pk", "search", "index_sources"))
    assert index(made[2].pk)[2] == [rewrite.pk]
    rows.update(search=None, index_sources=[])
    migration.recompute(None, SimpleNamespace(connection=connection))
    assert list(rows.values_list("pk", "search", "index_sources")) == before


def _rows_read(plan: dict, alias: str) -> int:
    """The rows the scans of `alias` (its partitions' too: `q_1`, ...) returned or filtered out, all loops."""
    own = 0
    if plan.get("Alias", "").split("_")[0] == alias:
        own = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * plan.get("Actual Loops", 1)
    return int(own) + sum(_rows_read(child, alias) for child in plan.get("Plans", []))


def test_previous_turns_are_read_by_one_ordered_look_up_each_while_statistics_lag(owner):
    """Rows just written have no statistics: each look-up must still read its one row, not the whole history.

    Whatever plan the statistics left by earlier tests make the planner choose (the thread's index, or the
    owner's read backwards from the row), two threads interleaved: a look-up reads a row or two."""
    threads = [make_thread(owner), make_thread(owner)]
    branches = [
        Branch(thread_id=thread.pk, items=[Supplied(role="user", content=f"turn {n} of {thread.pk}")])
        for n in range(200)
        for thread in threads
    ]
    created = transcripts_store(owner_id=owner.pk, branches=branches).created
    with lookup_cursor() as cursor:
        params = index_params(owner_id=owner.pk, ids=[m.pk for m in created])
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + INDEX_ROWS_SQL, params)
        [[explained]] = cursor.fetchall()
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    assert _rows_read(plan, "q") <= 3 * len(created), plan


def test_the_indexes_built_from_removed_messages_are_found_by_one_index_look_up_each(owner):
    """The planner chose to compare each of the owner's rows with every removed id (5 s for a purge of 10,000)."""
    made = typed(owner, [("user" if n % 2 else "assistant", f"turn number {n}") for n in range(300)])
    removed = [m.pk for m in made[::2]]
    assert index_dependents(owner_id=owner.pk, ids=removed) == [m.pk for m in made[1::2]]
    with connection.cursor() as cursor:
        params = {"owner": owner.pk, "ids": removed, "statuses": ["active"]}
        cursor.execute("EXPLAIN " + holding_sql(owner.pk), params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert re.search(r"Function Scan on unnest r(.|\n)*Bitmap Index Scan on \w*index_sources\w*", plan), plan
    # Nor is each row found compared with every removed id (`<> ALL`, not hashed there: 380 ms for 10,000).
    assert "ALL" not in plan, plan
