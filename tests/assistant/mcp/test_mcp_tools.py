"""The MCP tools' logic (assistant/tools.py), called directly: isolation, limits, throttles, the read log,
an agent's note in the graph, and what a deletion says about agents' reads."""

from datetime import UTC, datetime, timedelta

import pytest

from assistant.mcp import tools
from chat.agent_memory import agent_access_get, agent_access_set
from chat.facts.extract import facts_extract_pass
from chat.imports.history import history_import, history_parse
from chat.models import ContextEdge, MemoryRead, Message
from core.errors import Conflict, NotFound, ValidationFailed
from provenance.api.serializers.deletions import DeletionSerializer
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from provenance.dependents import dep_ids, taint_violations
from tests.factories import make_edge, make_message, make_thread, make_tool_steps

pytestmark = pytest.mark.django_db

CLIENT = "test-agent"


@pytest.fixture
def paris(thread):
    return make_message(thread, "I moved to Paris in 2021 for a job at the observatory")


def _remember(owner, text, derived_from=None):
    return tools.remember(user=owner, client=CLIENT, text=text, derived_from=derived_from)


def test_search_finds_the_owners_memory_says_why_and_logs_the_read(owner, paris, other_owner):
    make_message(make_thread(other_owner), "Bob moved to Paris too")

    found = tools.search_memory(user=owner, client=CLIENT, query="observatory Paris", k=5)

    assert [(m["id"], m["why"], m["text"]) for m in found["memories"]] == [(paris.pk, "same words", paris.content)]
    assert list(MemoryRead.objects.values_list("owner_id", "client", "tool", "message_ids")) == [
        (owner.pk, CLIENT, "search_memory", [paris.pk])
    ]


def test_search_that_finds_nothing_logs_nothing(owner, paris):
    assert tools.search_memory(user=owner, client=CLIENT, query="zebra", k=3) == {"memories": []}
    assert MemoryRead.objects.count() == 0


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"query": "", "k": 5}, "query"),
        ({"query": "x" * (tools.MAX_QUERY_CHARS + 1), "k": 5}, "query"),
        ({"query": "Paris", "k": 0}, "k"),
        ({"query": "Paris", "k": tools.MAX_K + 1}, "k"),
        ({"query": "Paris", "k": True}, "k"),
    ],
)
def test_search_refuses_bad_arguments(owner, arguments, field):
    with pytest.raises(ValidationFailed) as refused:
        tools.search_memory(user=owner, client=CLIENT, **arguments)
    assert list(refused.value.fields) == [field]


def test_remember_stores_a_note_deriving_from_the_memories_used(owner, paris):
    note = _remember(owner, "Alice works at the Paris observatory", derived_from=[paris.pk, paris.pk])

    stored = Message.objects.get(pk=note["id"])
    assert (stored.role, stored.thread.title, stored.embedding is not None) == ("note", "Agent notes", True)
    assert list(ContextEdge.objects.filter(target=stored).values_list("source_id", "signal")) == [(paris.pk, "agent")]
    assert note["derived_from"] == [paris.pk]
    # Retrievable like the user's own words.
    found = tools.search_memory(user=owner, client=CLIENT, query="observatory", k=5)
    assert sorted(m["id"] for m in found["memories"]) == sorted([paris.pk, stored.pk])


def test_remember_from_another_users_or_a_removed_memory_is_not_found_and_stores_nothing(owner, paris, other_owner):
    theirs = make_message(make_thread(other_owner), "Bob's secret")
    removed = make_message(paris.thread, "old", status=Message.Status.DELETED)
    before = Message.objects.count()

    errors = []
    for pk in (theirs.pk, removed.pk, 10**9):
        with pytest.raises(NotFound) as refused:
            _remember(owner, "note", derived_from=[paris.pk, pk])
        errors.append(refused.value.message)

    assert errors == [f"No memory with id {pk}." for pk in (theirs.pk, removed.pk, 10**9)]
    assert Message.objects.count() == before


def test_purging_a_source_removes_the_agents_note(owner, paris):
    note = _remember(owner, "Alice works at the Paris observatory", derived_from=[paris.pk])

    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[paris.pk])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    assert preview.dependent_ids == [note["id"]]
    assert Message.objects.get(pk=note["id"]).status == Message.Status.PURGED
    assert taint_violations(owner_id=owner.pk) == []


def test_explain_gives_sources_and_dependents_and_hides_other_users_ids(owner, paris, other_owner):
    note = _remember(owner, "Alice works at the Paris observatory", derived_from=[paris.pk])
    theirs = make_message(make_thread(other_owner), "Bob's secret")

    of_note = tools.explain(user=owner, client=CLIENT, id=note["id"])
    of_source = tools.explain(user=owner, client=CLIENT, id=paris.pk)

    assert [(s["id"], s["why"]) for s in of_note["sources"]] == [(paris.pk, "an agent said it used it")]
    assert [(d["id"], d["path"]) for d in of_source["dependents"]] == [(note["id"], [paris.pk, note["id"]])]
    assert of_source["dependent_count"] == 1
    messages = []
    for pk in (theirs.pk, 10**9):
        with pytest.raises(NotFound) as refused:
            tools.explain(user=owner, client=CLIENT, id=pk)
        messages.append(refused.value.message.replace(str(pk), "N"))
    assert messages == ["No message with id N.", "No message with id N."]


def test_forget_previews_with_the_confirmation_link_and_the_agents_reads(owner, paris):
    note = _remember(owner, "Alice works at the Paris observatory", derived_from=[paris.pk])
    tools.search_memory(user=owner, client=CLIENT, query="observatory", k=5)

    answer = tools.forget(user=owner, client=CLIENT, base_url="https://dellm.test/", ids=[paris.pk], mode="purge")

    deletion = answer["deletion"]
    assert (deletion["status"], deletion["matched"], deletion["dependents"]) == ("previewed", [paris.pk], [note["id"]])
    assert answer["confirm_url"] == f"https://dellm.test/?deletion={deletion['id']}"
    assert answer["confirmed"] is False
    reads = deletion["agent_reads"]
    assert (reads["count"], [(r["client"], r["tool"], r["messages"]) for r in reads["reads"]]) == (
        1,
        [(CLIENT, "search_memory", sorted([paris.pk, note["id"]]))],
    )
    assert "cannot erase copies outside itself" in reads["note"]
    assert Message.objects.get(pk=paris.pk).status == Message.Status.ACTIVE


def test_forget_by_request_resolves_it_like_the_chat(owner, paris):
    answer = tools.forget(user=owner, client=CLIENT, base_url="http://x", request='delete "observatory"')

    assert (answer["deletion"]["selector"], answer["deletion"]["matched"]) == ("request", [paris.pk])


def test_forget_confirms_only_where_the_user_allowed_it(owner, paris):
    with pytest.raises(tools.Refused):
        tools.forget(user=owner, client=CLIENT, base_url="http://x", ids=[paris.pk], confirm=True)
    assert Message.objects.get(pk=paris.pk).status == Message.Status.ACTIVE

    agent_access_set(owner_id=owner.pk, may_confirm_deletions=True)
    answer = tools.forget(user=owner, client=CLIENT, base_url="http://x", ids=[paris.pk], confirm=True)

    assert (answer["confirmed"], answer["deletion"]["status"]) == (True, "executed")
    assert Message.objects.get(pk=paris.pk).status == Message.Status.DELETED


def test_forget_of_another_users_id_is_not_found(owner, paris, other_owner):
    theirs = make_message(make_thread(other_owner), "Bob's secret")
    with pytest.raises(NotFound):
        tools.forget(user=owner, client=CLIENT, base_url="http://x", ids=[theirs.pk])


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"ids": [1], "request": "forget x"},
        {"ids": [1], "mode": "expire"},
        {"ids": ["1"]},
        {"ids": [1], "confirm": 1},
        {"request": "forget that I live in\x00 Paris"},
    ],
)
def test_forget_refuses_bad_arguments(owner, arguments):
    with pytest.raises(ValidationFailed):
        tools.forget(user=owner, client=CLIENT, base_url="http://x", **arguments)


def test_tools_are_throttled_per_user_with_the_apis_scopes(owner, other_owner, paris, monkeypatch):
    monkeypatch.setattr(tools.AgentThrottle, "THROTTLE_RATES", {"search": "2/min"})
    for _ in range(2):
        tools.search_memory(user=owner, client=CLIENT, query="Paris", k=1)

    with pytest.raises(tools.Throttled):
        tools.search_memory(user=owner, client=CLIENT, query="Paris", k=1)
    tools.search_memory(user=other_owner, client=CLIENT, query="Paris", k=1)  # per user
    assert MemoryRead.objects.filter(owner=owner).count() == 2


def test_receipt_says_which_removed_memories_agents_read(owner, paris):
    tools.search_memory(user=owner, client=CLIENT, query="observatory", k=5)
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[paris.pk])

    done = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    reads = DeletionSerializer(done).data["receipt"]["agent_reads"]
    assert (reads["count"], [(r["client"], r["messages"]) for r in reads["reads"]]) == (1, [(CLIENT, [paris.pk])])
    assert dep_ids(owner_id=owner.pk, roots=[paris.pk]) == {paris.pk}


def test_a_clients_name_is_kept_as_a_bounded_label(owner, paris):
    named = {
        "Claude Desktop": "Claude Desktop",
        "mcp-inspector_0.9": "mcp-inspector_0.9",
        "<b>my tortoise</b>\nis called Zanzibar-4471; my PIN: 0000, thanks!": "b my tortoise b is called Zanzibar-4471",
        "\u202e\x00🙂": "unknown",
        "x" * 100_000: "x" * 40,
    }
    for name in named:
        tools.search_memory(user=owner, client=name, query="observatory", k=5)

    stored = list(MemoryRead.objects.filter(owner=owner).order_by("id").values_list("client", flat=True))
    assert stored == list(named.values())


def test_agent_access_is_off_until_the_user_turns_it_on(api, other_api, owner):
    before = api.get("/api/agent-access/")
    turned_on = api.put("/api/agent-access/", {"may_confirm_deletions": True}, format="json")
    invalid = api.put("/api/agent-access/", {"may_confirm_deletions": "perhaps"}, format="json")

    assert (before.status_code, before.json()) == (200, {"may_confirm_deletions": False})
    assert (turned_on.status_code, turned_on.json()) == (200, {"may_confirm_deletions": True})
    assert invalid.status_code == 400
    assert other_api.get("/api/agent-access/").json() == {"may_confirm_deletions": False}
    assert agent_access_get(owner_id=owner.pk).may_confirm_deletions is True


def test_an_agents_note_survives_dellms_own_export_and_import_with_its_edge(owner, paris, other_owner, api):
    note = _remember(owner, "Alice works at the Paris observatory", derived_from=[paris.pk])
    export = b"".join(api.get("/api/export/").streaming_content)

    progress = history_import(owner_id=other_owner.pk, parsed=history_parse(data=export, format="dellm"))

    copied = Message.objects.get(owner=other_owner, role="note")
    assert (progress.messages_imported, copied.content) == (2, "Alice works at the Paris observatory")
    assert list(ContextEdge.objects.filter(target=copied).values_list("source__content", "signal")) == [
        (paris.content, "agent")
    ]
    assert note["id"] != copied.pk


def test_dates_are_when_it_was_said_an_imports_time_in_its_tool(owner, thread):
    said = datetime(2019, 5, 7, 9, 30, tzinfo=UTC)
    imported = make_message(
        thread, "I adopted a greyhound called Comet", imported_from="chatgpt", source_created_at=said
    )
    later = said + timedelta(hours=1)
    reply = make_message(thread, "What a fine dog.", role="assistant", imported_from="chatgpt", source_created_at=later)
    make_edge(imported, reply)

    found = tools.search_memory(user=owner, client=CLIENT, query="greyhound", k=5)
    explained = tools.explain(user=owner, client=CLIENT, id=reply.pk)

    assert [(m["id"], m["date"]) for m in found["memories"]] == [(imported.pk, "2019-05-07T09:30:00+00:00")]
    assert (explained["date"], [(s["id"], s["date"]) for s in explained["sources"]]) == (
        "2019-05-07T10:30:00+00:00",
        [(imported.pk, "2019-05-07T09:30:00+00:00")],
    )
    # DeLLM's own message: said when it was stored.
    own = make_message(thread, "Comet likes the beach")
    assert tools.explain(user=owner, client=CLIENT, id=own.pk)["date"] == own.created_at.isoformat()


def test_every_edge_signal_the_writer_stores_has_a_reason_in_words():
    signals = ["", *ContextEdge.Signal.values]
    assert sorted(tools.EDGE_WHY) == sorted(signals)
    assert all(tools.EDGE_WHY[signal] not in ("", signal) for signal in signals)


def test_explain_says_why_of_a_tool_step_in_words(owner, thread):
    steps = make_tool_steps(
        thread, question="Is it raining in Grenoble?", arguments='{"city": "Grenoble"}', result="rain", answer="Yes."
    )

    of_result = tools.explain(user=owner, client=CLIENT, id=steps["result"].pk)
    of_answer = tools.explain(user=owner, client=CLIENT, id=steps["answer"].pk)

    tool_why = "the tool call it is the result of, or a tool result it used"
    assert [(s["id"], s["why"]) for s in of_result["sources"]] == [(steps["call"].pk, tool_why)]
    assert sorted((s["id"], s["why"]) for s in of_answer["sources"]) == [
        (steps["question"].pk, "the message it answers, or taken by position"),
        (steps["result"].pk, tool_why),
    ]


def test_a_tool_results_words_are_never_found_by_search_memory(owner, thread, settings):
    # Similarity off (a floor no cosine reaches) and any shared word enough: what is found, is found by its words.
    settings.DELLM_CONTEXT_THRESHOLD = 1.01
    settings.DELLM_LEXICAL_FLOOR = 0.01
    steps = make_tool_steps(
        thread,
        question="What is the weather in Grenoble?",
        arguments='{"station": "Quokkaberg"}',
        result="Quokkaberg station: zorblax hail",
        answer="Hail is expected in Grenoble.",
    )

    only_tool_words = tools.search_memory(user=owner, client=CLIENT, query="Quokkaberg zorblax", k=20)
    with_memory = tools.search_memory(user=owner, client=CLIENT, query="zorblax hail Quokkaberg Grenoble", k=20)

    assert only_tool_words == {"memories": []}
    assert sorted(m["id"] for m in with_memory["memories"]) == sorted([steps["question"].pk, steps["answer"].pk])
    assert list(MemoryRead.objects.values_list("message_ids", flat=True)) == [
        sorted([steps["question"].pk, steps["answer"].pk])
    ]


def test_a_note_derives_from_what_an_agent_was_shown_before_it_even_unsaid(owner, paris, thread):
    kept = make_message(thread, "I like jasmine tea")
    assert [m["id"] for m in tools.search_memory(user=owner, client=CLIENT, query="observatory", k=5)["memories"]] == [
        paris.pk
    ]
    # Another client of the same user writes it down without saying where it came from.
    note = tools.remember(user=owner, client="another-client", text="Alice is at the Paris observatory")
    edges = ContextEdge.objects.filter(target_id=note["id"]).values_list("source_id", "signal")
    assert list(edges) == [(paris.pk, "read")]
    assert tools.explain(user=owner, client=CLIENT, id=note["id"])["sources"][0]["why"] == (
        "an agent was shown it shortly before writing"
    )
    # Forgetting what was read takes the note; what was not read stays.
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[paris.pk])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    assert (Message.objects.get(pk=note["id"]).status, Message.objects.get(pk=kept.pk).status) == ("purged", "active")
    assert taint_violations(owner_id=owner.pk) == []


def test_a_read_older_than_the_window_is_no_source_and_a_removed_one_refuses_the_note(owner, paris, settings):
    tools.search_memory(user=owner, client=CLIENT, query="observatory", k=5)
    settings.DELLM_NOTE_READ_WINDOW = timedelta(seconds=0)
    old = _remember(owner, "Something else entirely")
    assert list(ContextEdge.objects.filter(target_id=old["id"])) == []
    settings.DELLM_NOTE_READ_WINDOW = timedelta(hours=1)
    preview = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[paris.pk])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)
    before = Message.objects.count()
    with pytest.raises(Conflict) as refused:
        _remember(owner, "Alice works at the Paris observatory")
    assert refused.value.fields == {"read": str(paris.pk)}
    assert Message.objects.count() == before


def test_an_agent_s_forget_shows_no_text_and_matches_no_removed_message(owner, thread):
    live = make_message(thread, "I live in Lyon. My locker code is 918273.")
    hidden = make_message(thread, "Lyon was lovely in May")
    soft = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[hidden.pk])
    deletion_confirm(deletion_id=soft.pk, owner_id=owner.pk, confirmed_by=owner)
    answer = tools.forget(user=owner, client=CLIENT, base_url="http://x", request='forget "Lyon"', mode="purge")
    # The live message matches; the soft-deleted one would for its owner in person, never for an agent.
    assert answer["deletion"]["matched"] == [live.pk]
    # No redaction proposal: it would quote the rest of the message ("My locker code is 918273.").
    assert answer["deletion"]["redactions"] == []
    assert "918273" not in str(answer)
    own = deletion_preview(owner=owner, actor=owner, mode="purge", exact="Lyon")
    assert sorted(own.matched_ids) == sorted([live.pk, hidden.pk])


def _fact_of(owner, source):
    return Message.objects.get(owner=owner, role="fact", in_edges__source=source)


def test_search_marks_a_fact_with_its_subject_and_sources_and_logs_them_shown(owner, thread, settings):
    said = make_message(thread, "I live in Lisbon near the river.")
    facts_extract_pass(owner_id=owner.pk)
    fact = _fact_of(owner, said)

    found = tools.search_memory(user=owner, client=CLIENT, query="home city", k=5)

    assert [(m["id"], m["role"], m["subject"], m["sources"]) for m in found["memories"]] == [
        (fact.pk, "fact", "home", [said.pk])
    ]
    # The fact's words are its source's: the read log has both, though only the fact was listed.
    assert list(MemoryRead.objects.values_list("tool", "message_ids")) == [
        ("search_memory", sorted([fact.pk, said.pk]))
    ]
    # A message that is no fact has neither field. Beside its source, a fact goes just before it (with
    # DELLM_FACTS_CONTEXT=replace, the default, the fact stands for its source and is listed alone).
    settings.DELLM_FACTS_CONTEXT = "beside"
    both = tools.search_memory(user=owner, client=CLIENT, query="Lisbon river", k=5)["memories"]
    assert [(m["id"], "subject" in m, "sources" in m) for m in both] == [(fact.pk, True, True), (said.pk, False, False)]


def test_explain_of_a_fact_gives_subject_sources_supersession_and_dependents(owner, thread):
    lisbon = make_message(thread, "I live in Lisbon near the river.")
    porto = make_message(thread, "I moved to Porto last week, the new flat is great.")
    facts_extract_pass(owner_id=owner.pk)
    old, new = _fact_of(owner, lisbon), _fact_of(owner, porto)
    note = _remember(owner, "Alice lives in Porto", derived_from=[new.pk])

    of_old = tools.explain(user=owner, client=CLIENT, id=old.pk)
    of_new = tools.explain(user=owner, client=CLIENT, id=new.pk)

    assert (of_old["role"], of_old["subject"], of_old["current"], of_old["superseded_by"]) == (
        "fact",
        "home",
        False,
        new.pk,
    )
    assert (of_new["current"], of_new["superseded_by"]) == (True, None)
    assert [(s["id"], s["date"], s["why"]) for s in of_new["sources"]] == [
        (porto.pk, porto.created_at.isoformat(), "a fact drawn from the user's own words in it")
    ]
    assert [d["id"] for d in of_new["dependents"]] == [note["id"]]
    assert list(MemoryRead.objects.filter(tool="explain").order_by("id").values_list("message_ids", flat=True)) == [
        sorted([old.pk, lisbon.pk]),
        sorted([new.pk, porto.pk]),
    ]
    # A message that is no fact says nothing of subjects.
    assert "subject" not in tools.explain(user=owner, client=CLIENT, id=porto.pk)
