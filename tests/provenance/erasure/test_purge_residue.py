import pytest

from chat.turns.run import turn_run
from chat.turns.start import turn_create
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview
from tests.helpers import pg_dump

SECRET = "my locker code is 918273"
KEPT = "I enjoy long walks on the beach"


@pytest.mark.django_db(transaction=True)
def test_purge_leaves_no_trace_in_pg_dump(owner, thread):
    for text in [SECRET, KEPT, "What is my locker code?", "Remind me of my locker code"]:
        turn = turn_create(thread=thread, content=text, enqueue=False)
        turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
    dump = pg_dump()
    assert dump.count("918273") >= 3  # the secret flowed into replies: the test can see it

    preview = deletion_preview(owner=owner, actor=owner, exact="918273", mode="purge")
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)

    dump = pg_dump()
    assert "918273" not in dump
    assert "locker code is" not in dump
    assert KEPT in dump
