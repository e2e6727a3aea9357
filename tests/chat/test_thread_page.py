"""A thread a page at a time, each message's edges capped."""

import pytest

from chat.models import ContextEdge, Message
from tests.core.api.test_errors import error_of
from tests.factories import make_edge, make_long_thread, make_message


def _ids(body) -> list[int]:
    return [message["id"] for message in body]


def _next(response) -> str | None:
    link = response.get("Link", "")
    for part in link.split(", "):
        url, _, rel = part.partition("; ")
        if rel == 'rel="next"':
            return url.strip("<>")
    return None


def test_a_small_thread_is_answered_whole_as_before(api, thread):
    question = make_message(thread, "hello")
    reply = make_message(thread, "hi", role="assistant")
    make_edge(question, reply, rank=0, score=1.0)
    response = api.get(f"/api/threads/{thread.pk}/")
    body = response.json()
    assert _ids(body["messages"]) == [question.pk, reply.pk]
    assert body["messages"][1]["context"] == [question.pk]
    assert body["messages"][1]["edges_truncated"] is False
    assert body["messages_next"] is None
    assert "Link" not in response


def test_the_thread_opens_on_its_newest_page_and_links_to_older_ones(api, thread, settings):
    settings.DELLM_PAGE_SIZE = 2
    m = [make_message(thread, f"note {i}") for i in range(5)]
    response = api.get(f"/api/threads/{thread.pk}/")
    body = response.json()
    # The detail keeps its order (oldest first); the list pages go back in time, newest first.
    assert _ids(body["messages"]) == [m[3].pk, m[4].pk]
    assert body["messages_next"] == _next(response)
    assert body["messages_next"].startswith(f"http://testserver/api/threads/{thread.pk}/messages/?cursor=")
    older = api.get(body["messages_next"])
    assert _ids(older.json()) == [m[2].pk, m[1].pk]
    oldest = api.get(_next(older))
    assert _ids(oldest.json()) == [m[0].pk]
    assert _next(oldest) is None
    assert 'rel="prev"' in oldest["Link"]
    # Without a cursor the list starts at the newest message; page_size is carried along.
    first = api.get(f"/api/threads/{thread.pk}/messages/?page_size=3")
    assert _ids(first.json()) == [m[4].pk, m[3].pk, m[2].pk]
    assert _next(first).endswith("page_size=3") or "page_size=3&" in _next(first)
    assert _ids(api.get(_next(first)).json()) == [m[1].pk, m[0].pk]


def test_a_rewrite_is_paged_at_the_place_it_stands(api, thread, settings):
    settings.DELLM_PAGE_SIZE = 2
    m = [make_message(thread, f"note {i}") for i in range(3)]
    Message.objects.filter(pk=m[1].pk).update(status=Message.Status.DELETED)
    rewrite = make_message(thread, "rewritten", role="assistant", replaces=m[1].pk, place=m[1].seq)
    body = api.get(f"/api/threads/{thread.pk}/").json()
    assert _ids(body["messages"]) == [rewrite.pk, m[2].pk]
    assert _ids(api.get(body["messages_next"]).json()) == [m[0].pk]


# "cD1hYmM=" is base64 for "p=abc", a position that is no number.
@pytest.mark.parametrize("query", ["cursor=x", "cursor=cD1hYmM%3D", "page_size=0", "page_size=201"])
def test_a_bad_cursor_or_page_size_is_a_400(api, thread, query):
    make_message(thread, "x")
    assert error_of(api.get(f"/api/threads/{thread.pk}/messages/?{query}"), 400)["code"] == "validation_error"


def test_another_users_thread_messages_are_404(other_api, thread):
    make_message(thread, "x")
    assert error_of(other_api.get(f"/api/threads/{thread.pk}/messages/"), 404)["code"] == "not_found"


def test_a_2000_message_thread_with_dense_edges_answers_a_bounded_page(api, owner):
    thread, ids = make_long_thread(owner, 2000, 100)
    assert ContextEdge.objects.filter(target__thread=thread).count() == 2000 * 100 - 100 * 101 // 2
    body = api.get(f"/api/threads/{thread.pk}/").json()
    messages = body["messages"]
    # The newest 50 (DELLM_PAGE_SIZE), each with its first 50 (DELLM_PAGE_MAX_EDGES) context edges by rank
    # and the replies it fed (at most 49 here, all shown).
    assert [m["seq"] for m in messages] == list(range(1951, 2001))
    assert all(m["context"] == [ids[m["seq"] - rank] for rank in range(1, 51)] for m in messages)
    assert all(m["derived"] == [ids[seq] for seq in range(m["seq"] + 1, 2001)] for m in messages)
    assert sum(len(m["context"]) + len(m["derived"]) for m in messages) == 50 * 50 + sum(range(50))
    assert all(m["edges_truncated"] for m in messages)
    # Deeper pages are bounded alike: the derived lists are cut too.
    older = api.get(body["messages_next"]).json()
    assert [m["seq"] for m in older] == list(range(1950, 1900, -1))
    assert all(len(m["context"]) == len(m["derived"]) == 50 and m["edges_truncated"] for m in older)


def test_a_message_lists_at_most_the_detail_cap_of_edges(api, thread, settings):
    settings.DELLM_MESSAGE_MAX_EDGES = 3
    hub = make_message(thread, "fed every reply")
    replies = [make_message(thread, f"reply {i}", role="assistant") for i in range(4)]
    for reply in replies:
        make_edge(hub, reply)
    body = api.get(f"/api/messages/{hub.pk}/").json()
    assert body["derived"] == [reply.pk for reply in replies[:3]]
    assert body["edges_truncated"] is True
    settings.DELLM_MESSAGE_MAX_EDGES = 4
    body = api.get(f"/api/messages/{hub.pk}/").json()
    assert body["derived"] == [reply.pk for reply in replies]
    assert body["edges_truncated"] is False


def test_a_live_message_caps_what_it_shows_and_a_removed_one_shows_removed_neighbours(api, thread, settings):
    settings.DELLM_PAGE_MAX_EDGES = 2
    sources = [make_message(thread, f"source {i}") for i in range(3)]
    reply = make_message(thread, "reply", role="assistant")
    for rank, source in enumerate(sources):
        make_edge(source, reply, rank=rank)
    Message.objects.filter(pk=sources[0].pk).update(status=Message.Status.DELETED)
    # The removed neighbour is not counted against the cap of a live message.
    [shown] = [m for m in api.get(f"/api/messages/?thread={thread.pk}").json()["results"] if m["id"] == reply.pk]
    assert (shown["context"], shown["edges_truncated"]) == ([sources[1].pk, sources[2].pk], False)
    Message.objects.filter(pk=reply.pk).update(status=Message.Status.DELETED)
    [removed] = api.get(f"/api/messages/?thread={thread.pk}&status=deleted").json()["results"][1:]
    assert (removed["context"], removed["edges_truncated"]) == ([sources[0].pk, sources[1].pk], True)
