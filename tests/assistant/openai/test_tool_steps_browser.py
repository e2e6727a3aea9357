"""A `/v1` client's tool-using conversation in the graph and its deletion preview, in Chromium.

The conversation is stored through the writer as the endpoint stores it
(tests/assistant/openai/test_tool_calls.py drives the endpoint itself): a memory, a
question, the model's tool call, the client's result and the answer.
"""

import httpx
import pytest
from playwright.sync_api import expect

from chat.index.embeddings import embed_one
from chat.writer import Source, Supplied, message_store, tool_results_store
from core.auth.tokens import token_create
from tests.factories import make_thread, make_user
from tests.pages import click_node, explorer, screenshot, sign_in, wait_graph_ready

pytestmark = pytest.mark.browser

FACT = "I live in Grenoble, near the river."
CALLS = [{"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Grenoble"}'}]


def _conversation(user):
    thread = make_thread(user, "Via the OpenAI-compatible API")

    def store(role, text, sources=(), **extra):
        return message_store(owner_id=user.pk, thread_id=thread.pk, role=role, content=text, sources=sources, **extra)

    fact = store("user", FACT, embedding=embed_one(FACT))
    noted = store("assistant", "Noted.", [Source(id=fact.pk)])
    question = store("user", "What is the weather where I live?")
    call = store("assistant", "", [Source(id=question.pk), Source(id=fact.pk, rank=1, score=0.8)], tool_calls=CALLS)
    (result,) = tool_results_store(
        owner_id=user.pk,
        call_id=call.pk,
        results=[Supplied(role="tool", content="Sunny, 21 C", tool_call_id="call_w1")],
    )
    answer = store(
        "assistant", "It is sunny in Grenoble.", [Source(id=question.pk), Source(id=result.pk, rank=2, signal="tool")]
    )
    return fact, noted, call, result, answer


def test_tool_steps_are_drawn_as_such_and_the_deletion_preview_names_them(open_page, live_server, transactional_db):
    user = make_user("tess")
    fact, noted, call, result, answer = _conversation(user)
    page = open_page()
    sign_in(page, "tess")
    page.get_by_role("link", name="Memory graph").click()
    wait_graph_ready(page)

    # Their own style, the existing ones kept; the legend names them.
    shapes = {m.pk: explorer(page, f"x.node({m.pk}).style('shape')") for m in (fact, noted, call, result, answer)}
    assert shapes == {
        fact.pk: "round-rectangle",
        noted.pk: "ellipse",
        call.pk: "tag",
        result.pk: "barrel",
        answer.pk: "ellipse",
    }
    assert explorer(page, f"x.node({call.pk}).style('background-color')") == "rgb(234,88,12)"
    assert explorer(page, f"x.node({result.pk}).style('background-color')") == "rgb(8,145,178)"
    assert explorer(page, "x.cy.edges('[signal = \"tool\"]').map((e) => e.id()).sort()") == sorted(
        [f"e{call.pk}-{result.pk}", f"e{result.pk}-{answer.pk}"]
    )
    assert explorer(page, "x.cy.edges('[signal = \"tool\"]').first().style('line-style')") == "dashed"
    # Laid out by dagre in the layout worker (graph/layout-worker.js): every edge points right, older to newer.
    assert explorer(page, "x.cy.edges().filter((e) => e.source().position().x >= e.target().position().x).size()") == 0
    legend = page.get_by_role("list", name="Legend")
    expect(legend).to_contain_text("tool call")
    expect(legend).to_contain_text("tool result")
    expect(legend).to_contain_text("tool step")
    assert explorer(page, f"x.node({call.pk}).data('caption')") == f"#{call.seq} (tool call)"
    screenshot(page, "graph-tool-steps")
    page.screenshot(path="/tmp/graph-tool-steps.png")

    # Preview deleting the memory: the call, its result and the answer go, listed as tool steps.
    click_node(page, fact.pk)
    panel = page.locator(".explorer-panel")
    panel.get_by_role("button", name="Preview delete").click()
    expect(panel.locator(".preview-summary")).to_contain_text(f"Deleting #{fact.seq} removes 5 messages")
    assert explorer(page, "x.highlighted()") == sorted([fact.pk, noted.pk, call.pk, result.pk, answer.pk])
    expect(panel.locator(".tool-note")).to_contain_text("3 tool steps will go")
    expect(panel.locator(".tool-note")).to_contain_text("never rewritten")
    badges = panel.locator(".dep-list [data-tool-step]")
    expect(badges).to_have_count(3)
    assert [badges.nth(i).get_attribute("data-tool-step") for i in range(3)] == ["call", "result", "answer"]
    screenshot(page, "graph-tool-steps-preview")
    page.screenshot(path="/tmp/graph-tool-steps-preview.png")

    # The deletion card a request opens (the link a /v1 client gets) says the same; regenerating rewrites no tool
    # step ("Noted." answered the fact itself, so it is not rewritten either).
    token = token_create(user=user)[1]
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Token {token}"}) as client:
        preview = client.post(
            "/api/deletions/", json={"select": {"ids": [fact.pk]}, "mode": "soft", "derived": "regenerate"}
        ).json()
    assert [step["id"] for step in preview["tool_steps"]] == [call.pk, result.pk, answer.pk]
    assert preview["regenerate"] == []
    page.goto(f"/?deletion={preview['id']}")
    card = page.get_by_role("group", name="Forget request")
    expect(card.locator(".ditem")).to_have_count(5)
    expect(card.locator(".tool-note")).to_contain_text("3 tool steps will go")
    expect(card.locator(".ditem [data-tool-step]")).to_have_count(3)
    screenshot(page, "chat-tool-steps-deletion")


def test_the_chat_page_shows_tool_calls_and_results_as_compact_lines_of_text(open_page, transactional_db):
    user = make_user("tilda")
    _, _, call, result, answer = _conversation(user)
    # A second call whose arguments are long and look like markup: truncated, and shown as text.
    markup = '{"html": "<img src=x onerror=alert(1)>", "pad": "' + "x" * 80 + '"}'
    second = message_store(
        owner_id=user.pk,
        thread_id=call.thread_id,
        role="assistant",
        content="",
        sources=[Source(id=answer.pk)],
        tool_calls=[{"id": "call_h1", "name": "render_html", "arguments": markup}],
    )
    page = open_page()
    sign_in(page, "tilda")
    page.goto(f"/?thread={call.thread_id}")

    calls = page.locator(f"#m-{call.pk} .tool-step")
    expect(calls).to_have_text(['called get_weather({"city": "Grenoble"})'])
    expect(calls).to_have_class("tool-step role-tool")
    expect(page.locator(f"#m-{result.pk} .tool-step")).to_have_text(["tool result for call_w1: Sunny, 21 C"])
    expect(page.locator(f"#m-{second.pk} .tool-step")).to_have_text([f"called render_html({markup[:59]}…)"])
    assert page.locator(f"#m-{second.pk} img").count() == 0
    # Ordinary messages keep their bubbles.
    expect(page.locator(f"#m-{answer.pk} .msg-body")).to_have_text("It is sunny in Grenoble.")
    assert page.locator(".tool-step").count() == 3
    screenshot(page, "chat-tool-steps")
    page.screenshot(path="/tmp/chat-tool-steps.png")
