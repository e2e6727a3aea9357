import re
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField


class OwnerPartitioned(models.Model):
    """A table hash-partitioned by `owner_id` (docs/subsystems/schema.md).

    Django keeps `id` as the primary key (ids stay unique, from one sequence),
    while the database's key is (owner_id, id). So that the planner reads one
    partition, a row's own UPDATE and reload name its owner, as every product
    query does: Django's `save()` and `refresh_from_db()` would look the row up
    by id alone, in every partition.
    """

    owner_id: int

    class Meta:
        abstract = True

    def _do_update(self, base_qs: Any, *args: Any, **kwargs: Any) -> Any:
        return super()._do_update(base_qs.filter(owner_id=self.owner_id), *args, **kwargs)

    def refresh_from_db(
        self, using: str | None = None, fields: Any = None, from_queryset: models.QuerySet | None = None
    ) -> None:
        if from_queryset is None:
            from_queryset = type(self)._base_manager.filter(owner_id=self.owner_id)  # type: ignore[misc]
        super().refresh_from_db(using=using, fields=fields, from_queryset=from_queryset)


class Thread(OwnerPartitioned):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="threads")
    title = models.CharField(max_length=200, blank=True, default="")
    # A derived title's sources: the user messages it was drawn from (chat/titles.py), so a deletion of one
    # draws it again from what survives. Empty: the title is the user's own, an import's, or none.
    title_sources = ArrayField(models.BigIntegerField(), default=list, db_default="{}", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # An imported conversation: the tool it came from and its id there, so a
    # second import of the same file finds it ("" for DeLLM's own threads).
    # db_default too: bulk loaders (the lab's seeder COPYs rows) name only the columns they fill.
    source = models.CharField(max_length=16, blank=True, default="", db_default="")
    source_id = models.CharField(max_length=200, blank=True, default="", db_default="")

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="thread_owner_recent")]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "source", "source_id"],
                condition=~models.Q(source=""),
                name="thread_owner_source_unique",
            )
        ]

    # Set by the thread detail view: its newest page of live messages, with
    # edges attached, and the URL of the page before it (None: that was all).
    live_messages: list["Message"]
    messages_next: str | None

    def __str__(self) -> str:
        return f"Thread {self.pk}"


# A tool step's shape, as OpenAI's API bounds it (at most 128 tools or calls, a
# function name of 1-64 letters, digits, `_` and `-`) and as Message.tool_call_id
# holds it: `/v1` and DeLLM's import check the same rules.
MAX_TOOL_CALLS = 128
MAX_TOOL_CALL_ID = 200
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class Message(OwnerPartitioned):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SUMMARY = "summary"
        # A `/v1` client's system prompt, stored so that the model sees only
        # stored nodes: an input of the replies it shaped (an edge to each),
        # never retrieved as memory (chat/retrieval/).
        SYSTEM = "system"
        # A `/v1` client's tool result (its tool's output for one call of a
        # reply's `tool_calls`): derives from that call (a `tool` edge), never
        # retrieved as memory (docs/OPENAI.md, "Tool calls").
        TOOL = "tool"
        # A note an agent stored through MCP (`remember`): memory like a user's
        # message (embedded, retrieved), with an `agent` edge from each memory
        # the agent said it used, so it leaves with them (assistant/mcp/tools.py).
        NOTE = "note"
        # A fact about the user distilled from their own words (chat/facts/): a
        # derived node with a `fact` edge from each message it was drawn from,
        # stored in the owner's facts thread, retrieved like memory.
        FACT = "fact"

    class Status(models.TextChoices):
        ACTIVE = "active"
        DELETED = "deleted"
        PURGED = "purged"
        EXPIRING = "expiring"

    # Statuses that take part in contexts and the visible history. An
    # `expiring` message is still live until its scheduled deletion fires.
    # Everything else was removed by a deletion. The one definition of both
    # (LIVE_STATUSES / REMOVED_STATUSES below are the plain strings for raw SQL).
    LIVE = (Status.ACTIVE, Status.EXPIRING)
    REMOVED = (Status.DELETED, Status.PURGED)

    # No index of their own: the primary key (owner_id, id) and message_thread_seq lead with them, and every
    # index is written again for each row a removal's recompute rewrites (migration 0019).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    # In the database (owner_id, thread_id) references the thread's (owner_id, id): a message's thread is its owner's.
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="messages", db_constraint=False, db_index=False
    )
    seq = models.PositiveBigIntegerField(help_text="Per-owner sequence number (the paper's message id).")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    # No dimension: any embedder fits; `embedding_model` says which vector space a row is in.
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True, default="")
    # The message's index (chat/index/context.py): its own words weighted 'A'
    # and its conversational context 'B', set by the writer (null: a purged
    # tombstone). Derived from the messages in `index_sources` too.
    search = SearchVectorField(null=True, blank=True)
    # The ids of the messages whose words this message's `search` and
    # `embedding` carry (its previous turn): when one is removed or restored,
    # the writer recomputes this index from what is live. Ids only.
    index_sources = ArrayField(models.BigIntegerField(), default=list, db_default="{}", blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # The id of the provenance deletion that removed (or scheduled) this
    # message. A plain indexed id (`message_deleted_by`, over the removed
    # messages only), not a foreign key: chat records and never
    # depends on provenance, whose services decide and pass it to the
    # writer's status functions (`chat.writer`), under the owner's lock. Deletion rows are never
    # deleted on their own (only with their owner, whose messages go too), so
    # the id cannot dangle.
    deleted_by_id = models.BigIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # A rewrite (a regenerated reply, a redacted message) takes the place of the
    # message it replaces: `replaces` keeps that message's id only (no foreign
    # key, so nothing of it is reachable from here), `place` the sequence number
    # whose position it is shown at in its thread (null: its own `seq`).
    replaces = models.BigIntegerField(null=True, blank=True, help_text="Id of the message this one rewrites.")
    place = models.PositiveBigIntegerField(null=True, blank=True, help_text="Shown at this seq's position.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Imported from another tool ("chatgpt", "claude", "dellm", "jsonl"; ""
    # for DeLLM's own): an imported reply's provenance is unknown and recorded
    # conservatively (chat/imports/history.py, chat/writer/). `source_id` is its id in that tool,
    # unique within its thread, and `source_created_at` its time there.
    imported_from = models.CharField(max_length=16, blank=True, default="", db_default="")
    source_id = models.CharField(max_length=200, blank=True, default="", db_default="")
    source_created_at = models.DateTimeField(null=True, blank=True)
    # A reply in which the model called the client's tools: [{"id", "name",
    # "arguments"}] (the model's words, so text: emptied by a purge like
    # `content`). Null for every other message. A `tool` message names the
    # call it answers in `tool_call_id` (the model's id for it, text too).
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=MAX_TOOL_CALL_ID, blank=True, default="", db_default="")

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "seq"], name="message_owner_seq_unique"),
            models.UniqueConstraint(
                fields=["owner", "thread", "source_id"],
                condition=~models.Q(source_id=""),
                name="message_thread_source_unique",
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "status", "seq"], name="message_owner_status_seq"),
            models.Index(fields=["thread", "seq"], name="message_thread_seq"),
            GinIndex(fields=["search"], name="message_search_gin"),
            # Looked up once per removed message (chat.index.context): without a pending list of
            # unmerged entries, which each look-up reads whole (67 s for a purge of 10,000 after its own UPDATE).
            GinIndex(fields=["index_sources"], name="message_index_sources_gin", fastupdate=False),
            # The rewrites shown at another's place: with message_thread_seq, a message's previous turn
            # in the order its thread shows (chat/index/context.py).
            models.Index(
                fields=["thread", "place", "seq"], condition=models.Q(place__isnull=False), name="message_thread_place"
            ),
            models.Index(
                fields=["deleted_by_id"], condition=models.Q(deleted_by_id__isnull=False), name="message_deleted_by"
            ),
        ]

    # Attached by `chat.selectors.with_edges` or `with_capped_edges` (not columns).
    context_edges: list["ContextEdge"]
    derived_edges: list["ContextEdge"]
    # Whether `with_capped_edges` left some of either list out.
    edges_truncated: bool

    def __str__(self) -> str:
        return f"Message #{self.seq} ({self.role}, {self.status})"

    @property
    def is_live(self) -> bool:
        return self.status in self.LIVE

    @property
    def said_at(self) -> datetime:
        """When it was said: its time in the tool it was imported from, else when DeLLM stored it (SAID_AT_SQL)."""
        return self.source_created_at or self.created_at


# A message's index: its vector (parsed into a Python list of floats, one
# object per dimension, for every row read) and its search vector. Reads that
# show, compare or page messages never need them: `.defer(*INDEX_FIELDS)`
# keeps a page of 50 from building 13,000 floats (lab/HISTORY.md, the soak).
INDEX_FIELDS = ("embedding", "search")

# When a message was said, as raw SQL over `chat_message` (unqualified: a
# query that joins it keeps these two names its own): the rule of `Message.said_at`. Not a column:
# an import stores the source's time in `source_created_at` and every other
# door the server's in `created_at`, and neither is ever rewritten, so one
# expression over the two cannot drift from them (docs/subsystems/turns.md, "When a message was said").
SAID_AT_SQL = "coalesce(source_created_at, created_at)"

# Plain strings for raw SQL parameters (psycopg would send an enum's name).
LIVE_STATUSES = [str(s) for s in Message.LIVE]
REMOVED_STATUSES = [str(s) for s in Message.REMOVED]


class Turn(OwnerPartitioned):
    """One request for a reply: the user's message and, once done, the reply."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="turns")
    # Foreign keys to a partitioned table: the database's constraint is the
    # composite `(owner_id, <column>) REFERENCES chat_message (owner_id, id)`
    # (migration 0013), which Django cannot declare; Django still cascades.
    user_message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="turns", db_constraint=False)
    reply = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True, default="", help_text="For humans; never message text.")
    attempts = models.PositiveIntegerField(default=0)
    policy = models.CharField(max_length=16, default="relevant")
    # A regeneration turn rewrites the reply `replaces` (an id only) for a
    # deletion run with `derived="regenerate"`; an ordinary turn has neither.
    replaces = models.BigIntegerField(null=True, blank=True, help_text="Id of the reply this turn rewrites.")
    # The id of the provenance deletion that asked for this regeneration. A
    # plain indexed id, not a foreign key (like `Message.deleted_by_id`): chat
    # records and never depends on provenance, whose services are the only
    # writers (`chat.turns` creates the turn with the id they pass in).
    deletion_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    # The system prompt (a `system` message of the thread) the reply is
    # generated under: a `/v1` client's instructions, read by the worker from
    # here (never carried in the task payload) and committed with an edge to
    # the reply. Null for every other turn.
    system_message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    # A turn that answers a client's tool results: the reply (with
    # `tool_calls`) whose results it was sent. The results are the `tool`
    # messages with a `tool` edge from it; the reply derives from them.
    tool_call = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "status"], name="turn_owner_status")]

    def __str__(self) -> str:
        return f"Turn {self.pk} ({self.status})"


class ContextEdge(OwnerPartitioned):
    """`source -> target`: `source` was in the context that produced `target`.

    `chat.writer` is their only writer (with the reply they lead to);
    provenance reads them to walk Dep(M) and never writes them.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # No single-column indexes on the ends: the unique (source, target) serves
    # lookups by source and `edge_target` those by target. A whole-history
    # context writes hundreds of edges per reply, each paying for every index.
    # Composite foreign keys in the database, as for Turn's (migration 0013).
    source = models.ForeignKey(
        Message, on_delete=models.CASCADE, related_name="out_edges", db_index=False, db_constraint=False
    )
    target = models.ForeignKey(
        Message, on_delete=models.CASCADE, related_name="in_edges", db_index=False, db_constraint=False
    )
    # 0 for the user message the reply answers, then 1..k by retrieval order.
    rank = models.PositiveSmallIntegerField()
    score = models.FloatField(help_text="Cosine similarity at retrieval time (1.0 for the user message).")

    class Signal(models.TextChoices):
        VECTOR = "vector"  # similar meaning: passed the cosine threshold
        LEXICAL = "lexical"  # same words: passed the full-text floor
        BOTH = "both"
        # `target` is a reply the client or a file supplied, which derives from
        # everything before it in its branch; stored in linear form
        # (chat/lineage.py): from the messages since the previous such reply
        # and from that reply.
        TRANSCRIPT = "transcript"
        # `source` is the system prompt the reply was generated under.
        SYSTEM = "system"
        # A tool step: `source` is a reply's tool call and `target` the
        # client's result for it, or `source` is a result and `target` the
        # reply that used it.
        TOOL = "tool"
        # `target` is an agent's note and `source` a memory an agent of the same user was shown shortly
        # before (the read log, chat.agent_memory): what it read may be in what it writes.
        READ = "read"
        # `target` is an agent's note (role `note`) and `source` a memory the
        # agent said it used (`remember(derived_from=...)`).
        AGENT = "agent"
        # `target` is a fact (role `fact`) and `source` a message of the user's it was drawn from.
        FACT = "fact"

    # Which signal brought `source` into the context; blank for the user
    # message itself and for contexts taken by position (window, full).
    signal = models.CharField(max_length=16, choices=Signal.choices, blank=True, default="", db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "source", "target"], name="edge_source_target_unique"),
            models.CheckConstraint(condition=~models.Q(source=models.F("target")), name="edge_not_self"),
        ]
        indexes = [models.Index(fields=["target"], name="edge_target")]

    def __str__(self) -> str:
        return f"{self.source_id} -> {self.target_id}"


class ImportJob(models.Model):
    """One upload of another tool's chat history, imported by a Celery job.

    Holds counts, ids and per-conversation errors (conversation id, field,
    reason), never message text. The uploaded file waits in `ImportUpload`
    and is deleted when the job ends.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    format = models.CharField(max_length=16, help_text="Detected or forced: chatgpt, claude, dellm, jsonl.")
    filename = models.CharField(max_length=200, blank=True, default="")
    conversations_total = models.PositiveIntegerField(default=0)
    conversations_done = models.PositiveIntegerField(default=0)
    conversations_failed = models.PositiveIntegerField(default=0)
    messages_total = models.PositiveIntegerField(default=0)
    messages_done = models.PositiveIntegerField(default=0)
    messages_imported = models.PositiveIntegerField(default=0)
    messages_skipped = models.PositiveIntegerField(default=0)
    edges_created = models.PositiveBigIntegerField(default=0)
    threads = ArrayField(models.BigIntegerField(), default=list, help_text="Threads that got new messages.")
    # [{"conversation", "field", "message"}]: ids, field names and our sentences only.
    errors = models.JSONField(default=list)
    error = models.TextField(blank=True, default="", help_text="Why the whole job failed; never message text.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="import_owner_recent")]

    def __str__(self) -> str:
        return f"Import {self.pk} ({self.format}, {self.status})"


class ImportUpload(models.Model):
    """An uploaded file until its job ends: user text, so it never goes to Redis or a task payload."""

    job = models.OneToOneField(ImportJob, on_delete=models.CASCADE, primary_key=True, related_name="upload")
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"Upload of import {self.job_id}"


class MemoryRead(models.Model):
    """One read of memories by an MCP client: which ids it was shown, by which client, when. Never text.

    DeLLM cannot erase what a client copied; this log lets a deletion's preview
    and receipt say which of its messages were read, by whom and when
    (docs/SECURITY.md). `client` is the name the client gave in MCP's
    `clientInfo` as a label (`chat.agent_memory.client_label`), `tool` the tool that read.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    client = models.CharField(max_length=40)
    tool = models.CharField(max_length=32)
    message_ids = ArrayField(models.BigIntegerField())
    read_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-read_at", "-id"]
        indexes = [GinIndex(fields=["message_ids"], name="memoryread_message_ids")]

    def __str__(self) -> str:
        return f"Read {self.pk} ({self.tool}, {len(self.message_ids)} messages)"


class AgentAccess(models.Model):
    """What a user lets MCP clients do beyond reading and writing notes (a per-user setting).

    No row: the defaults (an agent previews deletions; only the web app confirms them).
    """

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="agent_access"
    )
    # An MCP client may confirm the deletions it previews (`forget(confirm=true)`).
    may_confirm_deletions = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Agent access of user {self.owner_id}"


class Fact(models.Model):
    """What a fact node (a `fact` message) is about: its subject and the user's decision. Never text.

    Its words are the message's `content`; `subject` is a key of `chat.subjects.SUBJECTS`. Which fact of a
    subject is current is computed from what is live (chat/retrieval/facts.py), never stored.
    """

    class Decision(models.TextChoices):
        NONE = ""
        APPROVED = "approved"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The fact's message id (no foreign key to the partitioned table, like `Message.deleted_by_id`).
    message_id = models.BigIntegerField(unique=True)
    subject = models.CharField(max_length=16)
    decision = models.CharField(max_length=16, choices=Decision.choices, blank=True, default="")
    # Which extractor drew it: "rules" (offline) or "model".
    extractor = models.CharField(max_length=16, default="rules")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "subject"], name="fact_owner_subject")]

    def __str__(self) -> str:
        return f"Fact {self.message_id} ({self.subject})"


class FactDecline(models.Model):
    """A fact the user declined: never drawn again from `source_id` for `subject`. Ids only."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    source_id = models.BigIntegerField()
    subject = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "source_id", "subject"], name="factdecline_unique"),
        ]

    def __str__(self) -> str:
        return f"Declined {self.subject} from {self.source_id}"


class FactCursor(models.Model):
    """How far the owner's messages were read for facts: every user message up to `seq` was (chat/facts/extract.py).

    `failed`: the ids of messages whose extraction failed for good (the model's answer malformed twice, or the
    call failed), newest last, at most FAILED_KEPT; never text.
    """

    FAILED_KEPT = 1000

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+")
    seq = models.PositiveBigIntegerField(default=0)
    failed = ArrayField(models.BigIntegerField(), default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Facts of user {self.owner_id} read to #{self.seq}"
