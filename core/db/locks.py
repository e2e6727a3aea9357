"""Per-owner serialization shared by reply commits and deletion execution."""

from django.db import connection

# The first key of the two-key advisory lock namespaces DeLLM's locks so they
# cannot collide with another application's on a shared database.
_OWNER_LOCK_NAMESPACE = 0x0DE1


class _Held:
    """A commit hook that does nothing: while Django keeps it, the transaction holds the owner's lock.

    Django drops a transaction's commit hooks exactly when the lock goes: at
    a rollback, or at a rollback to a savepoint taken before the lock (the
    lock, taken in that savepoint, is released with it). At commit it runs,
    doing nothing, and goes with the lock.
    """

    def __init__(self, owner_id: int) -> None:
        self.owner_id = owner_id

    def __call__(self) -> None:
        pass


def owner_lock(owner_id: int) -> None:
    """Hold the owner's lock until the current transaction ends.

    Every write that could break I1 takes it: committing a reply and its edges
    (the context must still be live), executing or undoing a deletion (Dep must
    not grow underneath it), and allocating per-owner sequence numbers. A
    transaction that holds it already (a reply commit, then the writer it
    calls) sends no second statement.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("owner_lock() must be called inside transaction.atomic()")
    if any(isinstance(entry[1], _Held) and entry[1].owner_id == owner_id for entry in connection.run_on_commit):
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_OWNER_LOCK_NAMESPACE, owner_id])
    connection.on_commit(_Held(owner_id))
