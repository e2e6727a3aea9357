"""Every product query names its owner: the planner reads one partition of each per-owner table.

Each product flow runs under CaptureQueriesContext; then every SELECT,
UPDATE and DELETE it sent that reads a partitioned table is EXPLAINed
(`FORMAT JSON`), and the partitions in its plan are counted per table. A
query that does not name the owner (a lookup by id alone, a recursive CTE
whose recursive part joins edges by id only) has every partition in its plan.
Exempt, and not run here: the admin's cross-owner pages and the beat sweeps
over every owner (docs/subsystems/schema.md).
"""

import json
import re

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from assistant.mcp import tools
from chat.index.embeddings import embed_one
from chat.models import Message, Turn
from chat.partitions import is_partitioned
from chat.turns.tool_steps import tool_results_turn_create, turn_tool_steps
from chat.writer import Source, message_store
from core.auth.tokens import token_create
from core.db.planning import planned_parts
from tests.factories import make_edge, make_message, make_thread, make_tool_steps
from tests.helpers import FIXTURES

PARTITIONED = ("chat_thread", "chat_message", "chat_contextedge", "chat_turn", "provenance_deletionrequest")
_PARTITION = re.compile(rf"^({'|'.join(PARTITIONED)})_p\d+$")
_READS = re.compile(r"^\s*(SELECT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)
_TABLES = re.compile(rf"\b({'|'.join(PARTITIONED)})\b")
CHATGPT = (FIXTURES / "chatgpt_conversations.json").read_bytes()


def _relations(node: dict) -> list[str]:
    found = [node["Relation Name"]] if "Relation Name" in node else []
    for child in node.get("Plans", []):
        found += _relations(child)
    return found


def partitions_scanned(sql: str) -> dict[str, set[str]]:
    """{partitioned table: its partitions in the plan of `sql`}."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scanned: dict[str, set[str]] = {}
    for relation in _relations(plan[0]["Plan"]):
        match = _PARTITION.match(relation)
        if match:
            scanned.setdefault(match.group(1), set()).add(relation)
    return scanned


def wide_queries(queries: list[dict]) -> list[tuple[str, dict[str, int]]]:
    """The captured queries that read more than one partition of a table, with how many of each."""
    wide = []
    for query in queries:
        # A statement with planner settings of its own is sent with them (core.db.planning).
        _, sql = planned_parts(query["sql"])
        if not _READS.match(sql) or not _TABLES.search(sql):
            continue
        counts = {table: len(parts) for table, parts in partitions_scanned(sql).items()}
        if any(count > 1 for count in counts.values()):
            wide.append((sql, counts))
    return wide


def test_a_query_without_the_owner_is_caught(owner, thread):
    message = make_message(thread, "hello")
    assert partitions_scanned(f"SELECT * FROM chat_message WHERE id = {message.pk}") == {
        "chat_message": {f"chat_message_p{n}" for n in range(settings.DELLM_PARTITIONS)}
    }
    assert (
        wide_queries([{"sql": f"SELECT * FROM chat_message WHERE owner_id = {owner.pk} AND id = {message.pk}"}]) == []
    )
    # Sent with planner settings around it, it is EXPLAINed all the same.
    statement = f"SELECT * FROM chat_message WHERE id = {message.pk}"
    planned = f"SET LOCAL enable_sort = off; {statement}\n; RESET enable_sort"
    assert [sql for sql, _ in wide_queries([{"sql": planned}])] == [statement]


@pytest.fixture
def world(api, owner, thread, other_owner, django_capture_on_commit_callbacks):
    """The owner's small history (question, reply, a follow-up built on both) and another owner's."""
    question = make_message(thread, "I keep bees on my roof.", embedding=embed_one("I keep bees on my roof."))
    reply = make_message(thread, "Bees on a roof, noted.", role="assistant", embedding=embed_one("Bees, noted."))
    follow = make_message(thread, "How many bees?", embedding=embed_one("How many bees?"))
    answer = make_message(thread, "Many bees.", role="assistant", embedding=embed_one("Many bees."))
    make_edge(question, reply, rank=0, score=1.0)
    make_edge(reply, answer, rank=1, score=0.7)
    make_edge(follow, answer, rank=0, score=1.0)
    other = make_message(make_thread(other_owner), "Someone else's words.")
    make_message(other.thread, "Their reply.", role="assistant")

    def run(callable_):
        with django_capture_on_commit_callbacks(execute=True):
            return callable_()

    return {"api": api, "owner": owner, "thread": thread, "m": [question, reply, follow, answer], "run": run}


def _turn(w):
    body = w["run"](
        lambda: w["api"].post(f"/api/threads/{w['thread'].pk}/messages/", {"content": "My bees?"}, format="json")
    )
    assert body.status_code == 202, body.content
    assert w["api"].get(f"/api/turns/{body.json()['turn']['id']}/").json()["status"] == "done"


def _time_questions(w):
    # A "now" question compares the candidates' own words; "before I ..." finds the event it names.
    for question in ("Where are my bees now?", "What did I do before I kept bees?"):
        body = w["run"](
            lambda q=question: w["api"].post(f"/api/threads/{w['thread'].pk}/messages/", {"content": q}, format="json")
        )
        assert w["api"].get(f"/api/turns/{body.json()['turn']['id']}/").json()["status"] == "done"


def _dependents(w):
    assert w["api"].get(f"/api/messages/{w['m'][0].pk}/dependents/").json()["count"] == 2
    assert w["api"].get(f"/api/messages/{w['m'][0].pk}/").status_code == 200


def _thread_page(w):
    assert w["api"].get(f"/api/threads/{w['thread'].pk}/").status_code == 200
    assert w["api"].get(f"/api/threads/{w['thread'].pk}/messages/").status_code == 200
    assert w["api"].get("/api/messages/?q=bees").status_code == 200


def _graph(w):
    assert w["api"].get("/api/graph/").status_code == 200
    assert w["api"].get(f"/api/graph/?thread={w['thread'].pk}&include_deleted=true").status_code == 200
    assert w["api"].get("/api/graph/find/?q=paris&limit=2").status_code == 200


def _export(w):
    response = w["api"].get("/api/export/")
    assert response.status_code == 200
    b"".join(response.streaming_content) if response.streaming else response.content


def _preview(w):
    body = {"select": {"ids": [w["m"][0].pk]}, "mode": "soft"}
    assert w["api"].post("/api/deletions/", body, format="json").json()["total"] == 3


def _confirm_and_undo(w):
    preview = w["api"].post("/api/deletions/", {"select": {"ids": [w["m"][0].pk]}, "mode": "soft"}, format="json")
    deletion = preview.json()["id"]
    assert w["run"](lambda: w["api"].post(f"/api/deletions/{deletion}/confirm/")).json()["status"] == "executed"
    assert w["run"](lambda: w["api"].post(f"/api/deletions/{deletion}/undo/")).json()["status"] == "undone"
    assert w["api"].get("/api/deletions/").status_code == 200


def _purge_and_receipt(w):
    preview = w["api"].post("/api/deletions/", {"select": {"exact": "roof"}, "mode": "purge"}, format="json")
    deletion = preview.json()["id"]
    # Not its on-commit work: the VACUUM it enqueues cannot run inside the test's transaction.
    done = w["api"].post(f"/api/deletions/{deletion}/confirm/").json()
    assert done["status"] == "executed"
    assert w["api"].get(f"/api/deletions/{deletion}/").json()["receipt"] is not None


def _redact(w):
    preview = w["api"].post("/api/deletions/", {"select": {"exact": "roof"}, "mode": "purge"}, format="json")
    deletion = preview.json()["id"]
    choices = {"redactions": {str(w["m"][0].pk): "I keep bees."}}
    done = w["api"].post(f"/api/deletions/{deletion}/confirm/", choices, format="json").json()
    assert done["status"] == "executed", done
    assert Message.objects.filter(owner=w["owner"], content="I keep bees.", status="active").exists()


def _regenerate(w):
    body = {"select": {"exact": "roof"}, "mode": "soft", "derived": "regenerate"}
    deletion = w["api"].post("/api/deletions/", body, format="json").json()
    assert deletion["regenerate"] == [w["m"][3].pk]
    # The rewrite runs as an ordinary turn (Celery is eager here), then its check joins the receipt.
    done = w["run"](lambda: w["api"].post(f"/api/deletions/{deletion['id']}/confirm/")).json()
    assert done["status"] == "executed"
    assert w["api"].get(f"/api/deletions/{deletion['id']}/").json()["receipt"]["checks"]["regeneration"]["passed"]


def _resume(w):
    body = {"select": {"exact": "roof"}, "mode": "soft", "derived": "regenerate"}
    deletion = w["api"].post("/api/deletions/", body, format="json").json()["id"]
    assert w["run"](lambda: w["api"].post(f"/api/deletions/{deletion}/confirm/")).json()["status"] == "executed"
    # Its rewrite failed (the model was down): the owner runs it again.
    Turn.objects.filter(owner=w["owner"], deletion_id=deletion).update(status=Turn.Status.FAILED)
    resumed = w["run"](lambda: w["api"].post(f"/api/deletions/{deletion}/resume/"))
    assert resumed.status_code == 200, resumed.content
    assert not Turn.objects.filter(owner=w["owner"], deletion_id=deletion, status=Turn.Status.FAILED).exists()


def _import(w):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = w["run"](
        lambda: w["api"].post(
            "/api/imports/", {"file": SimpleUploadedFile("conversations.json", CHATGPT)}, format="multipart"
        )
    )
    assert response.status_code == 202
    assert w["api"].get(f"/api/imports/{response.json()['id']}/").json()["status"] == "done"


def _purge_an_import(w):
    _import(w)
    imported = Message.objects.filter(owner=w["owner"]).exclude(source_id="").order_by("seq").first()
    preview = w["api"].post("/api/deletions/", {"select": {"ids": [imported.pk]}, "mode": "purge"}, format="json")
    # Its keys become digests in the purge's transaction (not its on-commit VACUUM, as above).
    assert w["api"].post(f"/api/deletions/{preview.json()['id']}/confirm/").json()["status"] == "executed"
    imported.refresh_from_db()
    assert imported.source_id.startswith("purged:")


def _agent_tools(w):
    # The MCP tools' logic (assistant/tools.py): what an agent reads, writes and asks to forget.
    found = tools.search_memory(user=w["owner"], client="pruning", query="bees on the roof", k=3)
    assert found["memories"]
    assert tools.explain(user=w["owner"], client="pruning", id=w["m"][0].pk)["id"] == w["m"][0].pk
    note = w["run"](
        lambda: tools.remember(user=w["owner"], client="pruning", text="Bees.", derived_from=[w["m"][0].pk])
    )
    preview = tools.forget(user=w["owner"], client="pruning", base_url="http://testserver", ids=[note["id"]])
    assert preview["deletion"]["total"] == 1


def _v1(w):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=w['owner'])[1]}")
    first = {"model": "dellm", "messages": [{"role": "user", "content": "Where are my bees?"}]}
    response = w["run"](lambda: client.post("/v1/chat/completions", first, content_type="application/json"))
    assert response.status_code == 200
    reply = response.json()["choices"][0]["message"]["content"]
    # The next request repeats the conversation so far: /v1 aligns it with what it stored.
    again = {
        "model": "dellm",
        "messages": [*first["messages"], {"role": "assistant", "content": reply}, {"role": "user", "content": "More?"}],
    }
    response = w["run"](lambda: client.post("/v1/chat/completions", again, content_type="application/json"))
    assert response.status_code == 200
    assert response.json()["dellm"]["stored"] == 0
    # A system prompt is stored once per thread: the next request with it finds it.
    prompted = {"model": "dellm", "messages": [{"role": "system", "content": "Be brief."}, *again["messages"]]}
    for _ in range(2):
        response = w["run"](lambda: client.post("/v1/chat/completions", prompted, content_type="application/json"))
        assert response.status_code == 200


def _v1_tool_result(w):
    # A client answers the model's tool call: /v1 finds the call and its turn, then answers from the result.
    question = make_message(w["thread"], "Weather in Lyon?", embedding=embed_one("Weather in Lyon?"))
    call = message_store(
        owner_id=w["owner"].pk,
        thread_id=w["thread"].pk,
        role="assistant",
        content="",
        sources=[Source(id=question.pk)],
        tool_calls=[{"id": "call_1", "name": "weather", "arguments": "{}"}],
    )
    Turn.objects.create(owner=w["owner"], user_message=question, reply=call, status=Turn.Status.DONE)
    earlier = [
        {"role": m.role, "content": m.content} for m in Message.objects.filter(owner=w["owner"]).order_by("seq")
    ][:-1]
    request = {
        "model": "dellm",
        "messages": [
            *earlier,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
        ],
    }
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=w['owner'])[1]}")
    response = w["run"](lambda: client.post("/v1/chat/completions", request, content_type="application/json"))
    assert response.status_code == 200, response.content
    assert Message.objects.filter(owner=w["owner"], role="tool", content="Sunny").exists()


FLOWS = {
    "turn": _turn,
    "time questions": _time_questions,
    "dependents": _dependents,
    "thread page": _thread_page,
    "graph": _graph,
    "export": _export,
    "preview": _preview,
    "confirm and undo": _confirm_and_undo,
    "purge and receipt": _purge_and_receipt,
    "regenerate": _regenerate,
    "redaction": _redact,
    "resume": _resume,
    "import": _import,
    "purge of an import": _purge_an_import,
    "v1 alignment": _v1,
    "agent tools": _agent_tools,
    "v1 tool result": _v1_tool_result,
}


@pytest.mark.parametrize("flow", FLOWS)
def test_every_query_of_a_flow_reads_one_partition(world, flow):
    # On plain tables every plan would read "no partition": the check needs the partitioned schema.
    assert all(is_partitioned(table) for table in PARTITIONED)
    with CaptureQueriesContext(connection) as captured:
        FLOWS[flow](world)
    assert any(_TABLES.search(query["sql"]) for query in captured.captured_queries)
    assert wide_queries(captured.captured_queries) == []


def test_the_tool_steps_a_v1_turn_replays_are_read_on_one_partition(owner, thread, other_owner):
    make_message(make_thread(other_owner), "Someone else's words.")
    steps = make_tool_steps(thread, question="Weather?", arguments="{}", result="Sunny", answer="It is sunny.")
    # The results are stored already: the turn that answers them is all that is new.
    turn = tool_results_turn_create(call=steps["call"], results=[], question_id=steps["question"].pk, policy="dellm")
    with CaptureQueriesContext(connection) as captured:
        ((step, result_ids),) = turn_tool_steps(turn=turn)
    assert (step.results, result_ids) == ([("call_1", "Sunny")], [steps["result"].pk])
    assert wide_queries(captured.captured_queries) == []


def test_the_staff_review_of_a_subject_request_reads_the_users_partition(world, staff_client):
    body = {"select": {"exact": "roof"}, "mode": "purge"}
    deletion = world["api"].post("/api/deletions/", body, format="json").json()["id"]
    review = reverse("admin:provenance_deletionrequest_review", args=[deletion])
    with CaptureQueriesContext(connection) as captured:
        assert staff_client.get(review).status_code == 200
    # Only the page's first read, of the deletion by the id in its address (docs/ARCHITECTURE.md, exempt).
    ((sql, counts),) = wide_queries(captured.captured_queries)
    assert f'"provenance_deletionrequest"."id" = {deletion}' in sql and set(counts) == {"provenance_deletionrequest"}
