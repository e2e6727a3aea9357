"""Messages for staff: read-only, by status; a removed message shows as a tombstone.

Nothing here edits a message: content, embedding and edges change only
through the services, which keep the provenance graph consistent.
"""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from chat.models import Message
from core.admin import ReadOnlyModelAdmin

TOMBSTONE = "— purged —"
# Soft-deleted text stays in the row for the owner's undo; staff never read it.
DELETED_MARK = "— deleted —"
PREVIEW_CHARS = 80


def shown_content(message: Message, *, chars: int | None = None) -> str:
    """What the admin shows for a message's text: never anything of a removed (soft-deleted or purged) one."""
    if message.status == Message.Status.PURGED:
        return TOMBSTONE
    if message.status == Message.Status.DELETED:
        return DELETED_MARK
    return message.content if chars is None else Truncator(message.content).chars(chars)


@admin.register(Message)
class MessageAdmin(ReadOnlyModelAdmin):
    list_display = ["id", "seq", "owner", "thread_id", "role", "status", "text", "deleted_by", "created_at"]
    list_filter = ["status", "role", ("owner", admin.RelatedOnlyFieldListFilter), "created_at"]
    list_select_related = ["owner"]
    list_per_page = 50
    fields = [
        ("owner", "thread", "seq"),
        ("role", "status", "embedding_model"),
        "content_or_tombstone",
        ("deleted_by", "expires_at"),
        ("created_at", "updated_at"),
        "graph",
    ]
    readonly_fields = [name for row in fields for name in (row if not isinstance(row, str) else [row])]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        # Vectors are never shown; do not fetch them for every row.
        return super().get_queryset(request).defer("embedding", "search")

    @admin.display(description="text")
    def text(self, message: Message) -> str:
        return shown_content(message, chars=PREVIEW_CHARS)

    @admin.display(description="content")
    def content_or_tombstone(self, message: Message) -> str:
        return shown_content(message)

    @admin.display(description="deleted by")
    def deleted_by(self, message: Message) -> SafeString | None:
        # A plain id (chat never imports provenance); the link goes by URL name.
        if message.deleted_by_id is None:
            return None
        url = reverse("admin:provenance_deletionrequest_change", args=[message.deleted_by_id])
        return format_html('<a href="{}">Deletion {}</a>', url, message.deleted_by_id)

    @admin.display(description="provenance graph")
    def graph(self, message: Message) -> SafeString:
        url = reverse("admin:provenance_deletionrequest_graph", args=[message.owner_id])
        return format_html('<a href="{}">graph of this user</a>', url)
