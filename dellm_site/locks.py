"""Per-owner serialization shared by reply commits and deletion execution."""

from django.db import connection

# The first key of the two-key advisory lock namespaces DeLLM's locks so they
# cannot collide with another application's on a shared database.
_OWNER_LOCK_NAMESPACE = 0x0DE1


def owner_lock(owner_id: int) -> None:
    """Hold the owner's lock until the current transaction ends.

    Every write that could break I1 takes it: committing a reply and its edges
    (the context must still be live), executing or undoing a deletion (Dep must
    not grow underneath it), and allocating per-owner sequence numbers.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("owner_lock() must be called inside transaction.atomic()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_OWNER_LOCK_NAMESPACE, owner_id])
