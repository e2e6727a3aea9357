"""List endpoints make the same number of queries for 1 and for 3 items (no N+1)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from provenance.deletions.preview import deletion_preview
from tests.factories import make_edge, make_long_thread, make_message, make_thread


def populate(owner, n: int):
    thread = make_thread(owner, f"t{n}")
    for _ in range(n):
        question = make_message(thread, "I live in Paris")
        reply = make_message(thread, "Noted", role="assistant")
        make_edge(question, reply, rank=0, score=1.0)
        make_thread(owner)
        deletion_preview(owner=owner, actor=owner, mode="soft", ids=[question.pk])
    return thread


PATHS = [
    "/api/threads/",
    "/api/messages/",
    "/api/messages/?q=paris&status=all",
    "/api/graph/",
    "/api/graph/?include_deleted=true",
    "/api/deletions/",
    "/api/export/",
]


def count(api, path: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert api.get(path).status_code == 200
    return len(queries)


@pytest.mark.parametrize("path", [*PATHS, "thread", "thread-messages"])
def test_list_endpoint_queries_do_not_grow_with_items(api, owner, other_owner, path):
    thread = populate(owner, 1)
    populate(other_owner, 2)
    url = {"thread": f"/api/threads/{thread.pk}/", "thread-messages": f"/api/threads/{thread.pk}/messages/"}.get(
        path, path
    )
    with_one = count(api, url)
    populate(owner, 2)
    for _ in range(2):
        make_message(thread, "more")
    assert count(api, url) == with_one


def test_message_list_query_budget(api, owner, django_assert_max_num_queries):
    populate(owner, 3)
    # auth token, count, page, two edge queries
    with django_assert_max_num_queries(5):
        assert len(api.get("/api/messages/").json()["results"]) == 6


@pytest.mark.parametrize("items", [1, 3])
def test_thread_page_query_budget(api, owner, items, django_assert_num_queries):
    thread = populate(owner, items)
    # auth token, the thread, the page, two edge queries: the same for one exchange and for three
    with django_assert_num_queries(5):
        assert len(api.get(f"/api/threads/{thread.pk}/").json()["messages"]) == 2 * items
    with django_assert_num_queries(5):
        assert len(api.get(f"/api/threads/{thread.pk}/messages/").json()) == 2 * items


def test_dependents_queries_do_not_grow_with_dependents_or_their_depth(api, owner):
    # A root with one dependent, then with three more at growing distance: the ids, the count and every path
    # come from the same statements (the CTE and one bounded walk), not one query per dependent or per level.
    thread = make_thread(owner)
    root = make_message(thread, "I live in Paris")
    last = make_message(thread, "Noted", role="assistant")
    make_edge(root, last, rank=0, score=1.0)
    url = f"/api/messages/{root.pk}/dependents/"
    with_one = count(api, url)
    for _ in range(3):
        reply = make_message(thread, "Noted again", role="assistant")
        make_edge(last, reply, rank=0, score=1.0)
        last = reply
    assert count(api, url) == with_one
    assert api.get(url).json()["count"] == 4


def test_one_dependent_s_path_is_one_walk_whatever_its_length(api, owner, settings):
    # A 3,000-message chain (an import makes such chains): one query per level was 3,001 in one request.
    _, ids = make_long_thread(owner, 3000, width=1)
    url = f"/api/messages/{ids[1]}/dependents/{ids[3000]}/"
    with CaptureQueriesContext(connection) as queries:
        response = api.get(url)
    assert response.status_code == 200, response.content
    assert response.json()["path"] == [ids[seq] for seq in range(1, 3001)]
    assert [q["sql"].count("WITH RECURSIVE") for q in queries.captured_queries].count(1) == 1
    assert len(queries.captured_queries) <= 6
    # Past the bound it answers why, in the same bounded work, instead of walking on.
    settings.DELLM_MAX_PATH_LENGTH = 1000
    with CaptureQueriesContext(connection) as queries:
        too_far = api.get(url)
    assert (too_far.status_code, too_far.json()["error"]["fields"]) == (400, {"dependent_id": "too far"})
    assert len(queries.captured_queries) <= 7
    assert api.get(f"/api/messages/{ids[1]}/dependents/{ids[1000]}/").json()["path"] == [
        ids[seq] for seq in range(1, 1001)
    ]
    # An id past PostgreSQL's bigint is no message of anyone's: 404, not a 500.
    assert api.get(f"/api/messages/{ids[1]}/dependents/{10**20}/").status_code == 404
