"""With DEBUG (`make run`), a worker task and an event stream's read clear Django's query log as a request does.

Found by the soak (`dellm_bench --parts soak`): nothing sends `request_started` in a
Celery child or in the pool threads that serve stream reads, so each kept its last
9,000 queries, and their memory grew for the length of the run.
"""

from celery.signals import task_prerun
from django.db import connection, connections

from core.streams.endpoint import on_db_briefly
from tests.helpers import run_async


def test_each_task_starts_with_an_empty_query_log(transactional_db, settings):
    settings.DEBUG = True
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert len(connection.queries_log) >= 1

    task_prerun.send(sender=None, task_id="t1", task=None, args=(), kwargs={})

    assert len(connection.queries_log) == 0


def test_a_stream_read_leaves_no_query_log_on_its_thread(transactional_db, settings):
    settings.DEBUG = True

    def read():
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
        return connections["default"], len(connections["default"].queries_log)

    used, logged_during = run_async(on_db_briefly(read))

    assert logged_during >= 1
    assert len(used.queries_log) == 0
