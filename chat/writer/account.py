"""An account's rows deleted by the writer: its messages, edges and turns first, then the user and what hangs on it."""

from django.contrib.auth import get_user_model
from django.db import connection, transaction

from chat.models import ContextEdge, Message, Turn
from core.db.locks import owner_lock


def account_rows_delete(*, owner_id: int) -> dict[str, int]:
    """Delete every edge, turn and message of `owner_id`, then the user row; {table: rows deleted}.

    The writer's own rows go first, in SQL on the owner's partitions (Django's cascade would load them
    all into memory); the user's deletion then takes what hangs on it by foreign key: threads, import
    jobs and uploads, agents' reads, switch and tokens, API tokens, deletions. Under the owner's lock, in
    the caller's transaction: the eraser (provenance/erasure/account.py) vacuums and scrubs after it.
    """
    deleted = {}
    with transaction.atomic():
        owner_lock(owner_id)
        with connection.cursor() as cursor:
            for model in (ContextEdge, Turn, Message):
                cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE owner_id = %s", [owner_id])
                deleted[model._meta.db_table] = cursor.rowcount
        _, cascaded = get_user_model().objects.filter(pk=owner_id).delete()
    return deleted | {label.split(".")[-1].lower(): count for label, count in cascaded.items()}
