"""JSON shapes of threads, messages and turns (API.md). Output only; views validate input."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.models import ContextEdge, ImportJob, Message, Thread, Turn
from chat.selectors import MESSAGE_STATUS_FILTERS
from core.api.fields import StrictBooleanField, StrictCharField


def _shown(message: Message, edges: list[ContextEdge]) -> list[ContextEdge]:
    # A live message lists only live neighbours, so nothing removed shows up
    # in the visible history; a removed one (asked for by status) lists all.
    live = message.is_live
    return [edge for edge in edges if not live or edge.other_status in Message.LIVE]  # type: ignore[attr-defined]


def _neighbours(message: Message, edges: list[ContextEdge], other: str) -> list[int]:
    return [getattr(edge, other) for edge in _shown(message, edges)]


class ContextDetailSerializer(serializers.Serializer):
    """One message of a reply's context and why it was there."""

    id = serializers.IntegerField(source="source_id")
    rank = serializers.IntegerField(help_text="0 for the user message the reply answers, then retrieval order.")
    score = serializers.FloatField(help_text="Cosine similarity to the user message at retrieval time.")
    signal = serializers.CharField(
        help_text="vector (similar meaning), lexical (same words), both; transcript: this is a reply a "
        "client or a file supplied, which derives from everything before it in its conversation (stored "
        "linearly: the messages since the previous such reply, and that reply); system: the system prompt "
        "the reply was written under; agent: an agent's note (role note) derives from this memory, which the agent "
        "said it used (MCP `remember`); empty for the user message itself and for contexts taken by position "
        "(window, full)."
    )


class ToolCallSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    arguments = serializers.CharField(help_text="The call's arguments as the model wrote them (JSON text).")


class ExpirySerializer(serializers.Serializer):
    deletion = serializers.IntegerField(help_text="The scheduled deletion (`GET /api/deletions/{id}/`).")
    at = serializers.DateTimeField(help_text="When it fires (a worker runs due expiries within about 30 s).")


class MessageSerializer(serializers.ModelSerializer):
    """A stored message; `context` and `derived` are its provenance edges."""

    # Reads the edges that `chat.selectors.with_edges` attaches (no query per message).

    content = serializers.SerializerMethodField()
    context = serializers.SerializerMethodField(help_text="Ids of the messages this one was generated from.")  # type: ignore[assignment]
    derived = serializers.SerializerMethodField(help_text="Ids of the messages generated with this one in context.")
    context_detail = serializers.SerializerMethodField(
        help_text="The same edges as `context`, in order, with their rank, score and signal."
    )
    edges_truncated = serializers.BooleanField(
        read_only=True,
        help_text="True when `context` or `derived` lists only the first of this message's edges (a thread page "
        "lists at most DELLM_PAGE_MAX_EDGES each way, the message detail DELLM_MESSAGE_MAX_EDGES); "
        "the graph and the dependents endpoint have them all.",
    )
    tool_calls = serializers.SerializerMethodField(
        help_text="An assistant reply that called a `/v1` client's tools: its calls, "
        '[{"id", "name", "arguments"}] (arguments: a JSON string); null for every other message.'
    )
    tool_call_id = serializers.SerializerMethodField(
        help_text="A `tool` message (a client's result): the id of the call it answers; empty otherwise."
    )
    said_at = serializers.DateTimeField(
        read_only=True,
        help_text="When it was said: an imported message's time in the tool it came from, else `created_at` "
        "(the time its prompt shows and its retrieval ranks by).",
    )
    expiry = serializers.SerializerMethodField(
        help_text="An `expiring` message: the scheduled deletion that will take it first, and when; null otherwise."
    )
    imported_from = serializers.SerializerMethodField(
        help_text="The tool it was imported from (chatgpt, claude, dellm, jsonl); null for DeLLM's own. "
        "An imported reply derives from every earlier message of its conversation: its real provenance is unknown."
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "thread",
            "role",
            "content",
            "status",
            "created_at",
            "said_at",
            "expiry",
            "context",
            "derived",
            "context_detail",
            "edges_truncated",
            "imported_from",
            "replaces",
            "place",
            "tool_calls",
            "tool_call_id",
        ]
        extra_kwargs = {
            "replaces": {"help_text": "Id of the message this one rewrites (a regenerated reply, a redaction)."},
            "place": {"help_text": "The seq whose position in the thread this message is shown at; null: its own."},
        }

    def get_content(self, message: Message) -> str:
        return "" if self._hidden(message) else message.content

    def _hidden(self, message: Message) -> bool:
        # The owner reads their own soft-deleted text (to undo); staff pages
        # serialize with {"staff": True} and never see removed text. (The field
        # named `context` hides the serializer's context from mypy only: DRF's
        # metaclass moves declared fields off the class.)
        staff = bool(self.context.get("staff"))  # type: ignore[attr-defined]
        return message.status == Message.Status.PURGED or (staff and not message.is_live)

    @extend_schema_field(ExpirySerializer(allow_null=True))
    def get_expiry(self, message: Message) -> dict[str, Any] | None:
        if message.status != Message.Status.EXPIRING or message.expires_at is None or message.deleted_by_id is None:
            return None
        return dict(ExpirySerializer({"deletion": message.deleted_by_id, "at": message.expires_at}).data)

    # The calls and the id they answer are the model's words, hidden as `content` is.
    @extend_schema_field(ToolCallSerializer(many=True, allow_null=True))
    def get_tool_calls(self, message: Message) -> list[dict[str, str]] | None:
        return None if self._hidden(message) or not message.tool_calls else list(message.tool_calls)

    def get_tool_call_id(self, message: Message) -> str:
        return "" if self._hidden(message) else message.tool_call_id

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_context(self, message: Message) -> list[int]:
        return _neighbours(message, message.context_edges, "source_id")

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_derived(self, message: Message) -> list[int]:
        return _neighbours(message, message.derived_edges, "target_id")

    @extend_schema_field(ContextDetailSerializer(many=True))
    def get_context_detail(self, message: Message) -> list[dict[str, Any]]:
        return list(ContextDetailSerializer(_shown(message, message.context_edges), many=True).data)

    def get_imported_from(self, message: Message) -> str | None:
        return message.imported_from or None


class ThreadSerializer(serializers.ModelSerializer):
    title_derived = serializers.SerializerMethodField(
        help_text="True when the title was drawn from the thread's first user message (it is drawn again, or "
        "emptied, when that message is deleted); false for a title the user typed, an import's, or none."
    )

    class Meta:
        model = Thread
        fields = ["id", "title", "title_derived", "created_at", "updated_at"]

    def get_title_derived(self, thread: Thread) -> bool:
        return bool(thread.title_sources)

    def to_representation(self, thread: Thread) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(thread)
        # Staff pages read a thread's title only while it holds a live message: an imported conversation's
        # title comes from the export, and stays while its messages are soft-deleted (for an undo).
        if self.context.get("staff") and not getattr(thread, "has_live", True):
            data["title"] = ""
        return data


class ThreadDetailSerializer(ThreadSerializer):
    messages = MessageSerializer(
        source="live_messages",
        many=True,
        help_text="The thread's newest active (live) messages, at most a page of them, in order.",
    )
    messages_next = serializers.URLField(
        allow_null=True,
        read_only=True,
        help_text="The page of messages before these (GET /api/threads/{id}/messages/?cursor=), or null: "
        "`messages` is the whole thread.",
    )

    class Meta(ThreadSerializer.Meta):
        fields = [*ThreadSerializer.Meta.fields, "messages", "messages_next"]


class ThreadInputSerializer(serializers.Serializer):
    title = StrictCharField(required=False, allow_blank=True, trim_whitespace=False, help_text="At most 200.")


class ThreadRenameSerializer(serializers.Serializer):
    title = StrictCharField(allow_blank=True, trim_whitespace=False, help_text="At most 200 characters.")


class ChatInputSerializer(serializers.Serializer):
    content = StrictCharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The user's message. A deletion request (“forget that …”) becomes a deletion preview instead.",
    )


class TurnSerializer(serializers.ModelSerializer):
    message = serializers.IntegerField(source="user_message_id", help_text="Id of the user's message.")
    reply = MessageSerializer(allow_null=True)
    error = serializers.SerializerMethodField()

    class Meta:
        model = Turn
        fields = ["id", "status", "message", "reply", "error", "created_at", "updated_at"]

    def get_error(self, turn: Turn) -> str | None:
        return turn.error or None


class TurnRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Turn
        fields = ["id", "status"]


class ChatAcceptedSerializer(serializers.Serializer):
    message = MessageSerializer()
    turn = TurnRefSerializer()


class MessageQuerySerializer(serializers.Serializer):
    thread = serializers.IntegerField(required=False, help_text="Only this thread's messages.")
    status = serializers.ChoiceField(
        choices=MESSAGE_STATUS_FILTERS,
        default="active",
        help_text="`active` (the default) means live: active or expiring; `all` means every status.",
    )
    q = serializers.CharField(required=False, default="", help_text="Full-text search (web search syntax).")


class ImportJobSerializer(serializers.ModelSerializer):
    """An import job: counts, ids and per-conversation errors, never text."""

    # Shadows Serializer.errors, which this output-only serializer never validates.
    errors = serializers.ListField(  # type: ignore[assignment]
        child=serializers.DictField(child=serializers.CharField(allow_null=True)),
        help_text="[{conversation, field, message}]: the conversations that were not imported, and why.",
    )
    error = serializers.SerializerMethodField(help_text="Why the whole job failed; null otherwise.")
    threads = serializers.ListField(child=serializers.IntegerField(), help_text="Threads that got new messages.")

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "status",
            "format",
            "filename",
            "conversations_total",
            "conversations_done",
            "conversations_failed",
            "messages_total",
            "messages_done",
            "messages_imported",
            "messages_skipped",
            "edges_created",
            "threads",
            "errors",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_error(self, job: ImportJob) -> str | None:
        return job.error or None


class ImportInputSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text="ChatGPT's export zip or conversations.json, Claude's conversations.json, "
        "DeLLM's export, or JSONL (docs/IMPORT.md)."
    )
    format = serializers.ChoiceField(
        choices=["chatgpt", "claude", "dellm", "jsonl"], required=False, help_text="Detected when omitted."
    )


class AgentAccessSerializer(serializers.Serializer):
    may_confirm_deletions = StrictBooleanField(
        help_text="An MCP client may confirm the deletions it previews (`forget` with confirm). Off by default."
    )
