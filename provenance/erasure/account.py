"""Erasing a whole account (GDPR art. 17), through the one eraser: the user, or staff for them.

Everything of the account goes in one transaction under the owner's lock: its messages, edges and
turns by the writer, then the user row and what hangs on it (threads, imports and their uploads,
agents' reads, switch and tokens, every API token, the deletions' audit rows), its sign-in records
and its name in the admin log, and its per-owner vector indexes. Then, as after a purge, the vacuum
of the owner's partitions (`erased_at` once no older snapshot held it back) and the scrub of the
text indexes. What is left is the receipt, an `AccountErasure` of ids, counts and times
(docs/SECURITY.md, "Erasing an account").
"""

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from knox.models import AuthToken

from chat.models import ImportJob, Message, Thread
from chat.writer.account import account_rows_delete
from core.db.locks import owner_lock
from core.errors import NotFound, ValidationFailed
from core.types import User
from provenance.erasure.eraser import transaction_xid
from provenance.erasure.tasks import erasure_vacuum_task
from provenance.models import AccountErasure, DeletionRequest


def account_summary(*, owner: User) -> dict[str, int]:
    """What an erasure of `owner`'s account takes, counted (what the confirmation says)."""
    return {
        "threads": Thread.objects.filter(owner=owner).count(),
        "messages": Message.objects.filter(owner=owner).count(),
        "deletions": DeletionRequest.objects.filter(owner=owner).count(),
        "imports": ImportJob.objects.filter(owner=owner).count(),
        "tokens": AuthToken.objects.filter(user=owner).count(),
    }


def _traces_erase(*, owner_id: int, username: str) -> dict[str, int]:
    """What names the account outside its rows: django-axes' sign-in records of its username (addresses,
    user agents, times) deleted, and the admin log's entries about the user row anonymised (a staff
    erasure logs the username as the deleted object's name); {what: rows}."""
    sign_ins = sum(
        model.objects.filter(username=username).delete()[0] for model in (AccessAttempt, AccessFailureLog, AccessLog)
    )
    users = ContentType.objects.get_for_model(get_user_model())
    about = LogEntry.objects.filter(content_type=users, object_id=owner_id)
    logged = about.update(object_repr=f"erased account #{owner_id}", change_message="")
    return {"sign_in_records": sign_ins, "admin_log_entries": logged}


def account_erase(*, owner: User, actor: User, confirm: object) -> AccountErasure:
    """Erase `owner`'s account, asked by `actor` (the owner, or staff); `confirm` must be the owner's username.

    Side effects, in order, in one transaction under the owner's lock: every row of the account deleted
    (`account_rows_delete`), its tokens with it; the receipt written, with the transaction's id. On
    commit, the vacuum of the owner's partitions, which first drops the owner's per-owner vector indexes
    (concurrently: other owners of the partition go on meanwhile).
    """
    if not isinstance(confirm, str) or confirm != owner.get_username():
        raise ValidationFailed("Type the account's username to confirm its erasure.", fields={"username": "mismatch"})
    owner_id = owner.pk
    with transaction.atomic():
        # The owner's lock first, as every turn, import and deletion takes it: then the user's row.
        owner_lock(owner_id)
        if not get_user_model().objects.select_for_update().filter(pk=owner_id).exists():
            raise NotFound("No such account.")
        tokens = AuthToken.objects.filter(user_id=owner_id).count()
        traces = _traces_erase(owner_id=owner_id, username=owner.get_username())
        counts = account_rows_delete(owner_id=owner_id)
        erasure = AccountErasure.objects.create(
            owner_id=owner_id,
            actor_id=None if actor.pk == owner_id else actor.pk,
            counts={**counts, "tokens": tokens, **traces},
            purge_xid=transaction_xid(),
        )
        transaction.on_commit(lambda: erasure_vacuum_task.delay(owner_id=owner_id))
    return erasure
