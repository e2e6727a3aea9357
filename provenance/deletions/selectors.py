"""Reading deletions: the list, one, and what each shows (regeneration turns, tool steps, agent reads, imports)."""

from typing import Any

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef, QuerySet
from django.db.models.functions import JSONObject

from chat.models import MemoryRead, Message, Turn
from chat.selectors import tool_step_kinds
from core.errors import NotFound
from core.types import User
from provenance.models import DeletionRequest

# --- Reads for the HTTP API, all filtered by owner. ----------------------------


def deletion_list(*, owner: User) -> QuerySet[DeletionRequest]:
    return with_regeneration_turns(
        DeletionRequest.objects.filter(owner=owner).order_by("-created_at", "-id"), owner_id=owner.pk
    )


# The fields of a regeneration turn that its deletion's progress shows.
REGENERATION_TURN_FIELDS = ("id", "replaces", "user_message_id", "status", "reply_id", "error")


def with_regeneration_turns(deletions: QuerySet[DeletionRequest], *, owner_id: int) -> QuerySet[DeletionRequest]:
    """Each deletion annotated with `regeneration_turns`: its turns' fields as dicts, oldest reply first.

    Turns point at their deletion by a plain id (`Turn.deletion_id`: chat never
    depends on provenance), so there is no relation to prefetch; one array
    subquery in the same SELECT reads them for every listed deletion (no N+1).
    The deletions are `owner_id`'s: the subquery names the owner as a constant,
    so it reads the owner's partition of the turns only.
    """
    turns = (
        Turn.objects.filter(owner_id=owner_id, deletion_id=OuterRef("pk"))
        .order_by("replaces", "pk")
        .values(row=JSONObject(**{name: name for name in REGENERATION_TURN_FIELDS}))
    )
    return deletions.annotate(regeneration_turns=ArraySubquery(turns))


def imported_dependents_attach(deletions: list[DeletionRequest]) -> None:
    """Set `imported_dependents` (imported replies among the dependents) on each deletion, in one query."""
    wanted = {pk for deletion in deletions for pk in deletion.dependent_ids}
    imported: set[int] = set()
    if wanted:
        imported = set(
            Message.objects.filter(
                owner_id__in={d.owner_id for d in deletions}, pk__in=wanted, role=Message.Role.ASSISTANT
            )
            .exclude(imported_from="")
            .values_list("pk", flat=True)
        )
    for deletion in deletions:
        deletion.imported_dependents = [pk for pk in deletion.dependent_ids if pk in imported]


def tool_steps_attach(deletions: list[DeletionRequest]) -> None:
    """Set `tool_steps` ([{"id", "kind"}] of the matched and dependent tool steps, in id order) on each deletion."""
    kinds = tool_step_kinds(
        {pk for d in deletions for pk in [*d.matched_ids, *d.dependent_ids]}, owner_ids={d.owner_id for d in deletions}
    )
    for deletion in deletions:
        wanted = sorted({*deletion.matched_ids, *deletion.dependent_ids} & set(kinds))
        deletion.tool_steps = [{"id": pk, "kind": kinds[pk]} for pk in wanted]


# Reads listed per deletion, the newest first (`count` says how many there are).
AGENT_READS_LISTED = 50
COPIES_OUTSIDE = (
    "DeLLM cannot erase copies outside itself: these MCP clients were shown some of these memories "
    "(ids, client, time; never text). Ask them to forget too."
)


def _agent_reads_of(deletion: DeletionRequest, reads: list[MemoryRead]) -> dict[str, Any]:
    ids = set(deletion.matched_ids) | set(deletion.dependent_ids) | set(deletion.deleted_ids)
    hits = [
        {
            "client": read.client,
            "tool": read.tool,
            "read_at": read.read_at,
            "messages": sorted(ids & set(read.message_ids)),
        }
        for read in reads
        if read.owner_id == deletion.owner_id and ids.intersection(read.message_ids)
    ]
    return {"count": len(hits), "reads": hits[:AGENT_READS_LISTED], "note": COPIES_OUTSIDE if hits else ""}


def agent_reads_attach(deletions: list[DeletionRequest]) -> None:
    """Set `agent_reads` on each deletion: the MCP reads of its messages (chat.MemoryRead), in one query."""
    wanted = {pk for d in deletions for pk in (*d.matched_ids, *d.dependent_ids, *d.deleted_ids)}
    reads: list[MemoryRead] = []
    if wanted:
        reads = list(
            MemoryRead.objects.filter(
                owner_id__in={d.owner_id for d in deletions}, message_ids__overlap=sorted(wanted)
            ).order_by("-read_at", "-id")
        )
    for deletion in deletions:
        deletion.agent_reads = _agent_reads_of(deletion, reads)


def deletion_get(*, owner: User, deletion_id: int) -> DeletionRequest:
    deletion = DeletionRequest.objects.filter(owner=owner, pk=deletion_id).first()
    if deletion is None:
        raise NotFound(f"No deletion with id {deletion_id}.")
    return deletion


def removes_attach(deletions: list[DeletionRequest]) -> None:
    """Set `removes` on each deletion, in one query: for a preview, how many of its messages confirming changes now.

    Soft: the live ones. Purge or expire: every one not purged yet (a purge
    destroys the text of a soft-deleted one too). Dep(m) holds messages other
    deletions removed already; a preview counts only what it would change.
    None for a deletion that is not a preview.
    """
    previews = [d for d in deletions if d.status == DeletionRequest.Status.PREVIEWED]
    wanted = {pk for d in previews for pk in (*d.matched_ids, *d.dependent_ids)}
    status: dict[int, str] = {}
    if wanted:
        rows = Message.objects.filter(owner_id__in={d.owner_id for d in previews}, pk__in=wanted)
        status = dict(rows.values_list("pk", "status"))
    for deletion in deletions:
        deletion.removes = None
        if deletion.status == DeletionRequest.Status.PREVIEWED:
            soft = deletion.mode == DeletionRequest.Mode.SOFT
            changed = Message.LIVE if soft else (*Message.LIVE, Message.Status.DELETED)
            members = {*deletion.matched_ids, *deletion.dependent_ids}
            deletion.removes = sum(1 for pk in members if status.get(pk) in changed)
