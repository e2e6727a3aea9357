"""The deletion audit for staff: read-only, filterable, exportable as CSV, loud about failed receipts.

Its rows hold ids, counts and kinds, never message text nor the text of a
selection. The staff pages (integrity, graph, data-subject requests) live in
`provenance/admin_views.py` and are mounted here.
"""

import csv
from collections.abc import Callable
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin import ReadOnlyModelAdmin
from core.types import User
from provenance import admin_views
from provenance.erasure.account import account_erase, account_summary
from provenance.models import AccountErasure, DeletionRequest

Status = DeletionRequest.Status


class OnBehalfFilter(admin.SimpleListFilter):
    title = "asked by"
    parameter_name = "on_behalf"

    def lookups(self, request: HttpRequest, model_admin: "admin.ModelAdmin[DeletionRequest]") -> list[tuple[str, str]]:
        return [("yes", "staff, on the owner's behalf"), ("no", "the owner")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[DeletionRequest]) -> QuerySet[DeletionRequest]:
        if self.value() == "yes":
            return queryset.exclude(actor=F("owner"))
        if self.value() == "no":
            return queryset.filter(actor=F("owner"))
        return queryset


class ReceiptFilter(admin.SimpleListFilter):
    title = "verification"
    parameter_name = "verification"

    def lookups(self, request: HttpRequest, model_admin: "admin.ModelAdmin[DeletionRequest]") -> list[tuple[str, str]]:
        return [("passed", "passed"), ("failed", "failed"), ("none", "not verified")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[DeletionRequest]) -> QuerySet[DeletionRequest]:
        if self.value() == "passed":
            return queryset.filter(receipt__passed=True)
        if self.value() == "failed":
            return queryset.filter(receipt__passed=False)
        if self.value() == "none":
            return queryset.filter(receipt__isnull=True)
        return queryset


def verification_text(deletion: DeletionRequest) -> str:
    if deletion.receipt is None:
        return "—"
    if deletion.receipt["passed"]:
        return "passed"
    return "FAILED: " + ", ".join(deletion.receipt["failed"])


def _user(user: User | None) -> str:
    return "" if user is None else f"{user.get_username()} (#{user.pk})"


def _cell(value: object) -> str:
    # A spreadsheet runs a cell that starts with one of these as a formula.
    text = "" if value is None else str(value)
    return f"'{text}" if text[:1] in ("=", "+", "-", "@") else text


CSV_COLUMNS = {
    "id": lambda d: d.pk,
    "created_at": lambda d: d.created_at.isoformat(),
    "owner": lambda d: _user(d.owner),
    "actor": lambda d: _user(d.actor),
    "confirmed_by": lambda d: _user(d.confirmed_by),
    "on_behalf": lambda d: "yes" if d.on_behalf else "no",
    "selector": lambda d: d.selector,
    "resolved_selector": lambda d: d.resolved_selector,
    "threshold": lambda d: d.threshold,
    "mode": lambda d: d.mode,
    "depth": lambda d: d.depth,
    "expire_at": lambda d: d.expire_at and d.expire_at.isoformat(),
    "status": lambda d: d.status,
    "matched": lambda d: d.matched_count,
    "dependents": lambda d: d.dependent_count,
    "deleted": lambda d: len(d.deleted_ids),
    "outcome": lambda d: d.outcome,
    "verification": verification_text,
    "confirmed_at": lambda d: d.confirmed_at and d.confirmed_at.isoformat(),
    "executed_at": lambda d: d.executed_at and d.executed_at.isoformat(),
    "verified_at": lambda d: d.verified_at and d.verified_at.isoformat(),
    "undone_at": lambda d: d.undone_at and d.undone_at.isoformat(),
}


@admin.register(DeletionRequest)
class DeletionRequestAdmin(ReadOnlyModelAdmin):
    list_display = [
        "id",
        "created_at",
        "owner",
        "actor",
        "confirmed_by",
        "on_behalf",
        "selector",
        "mode",
        "depth",
        "matched",
        "dependents",
        "deleted",
        "status",
        "outcome",
        "verification",
        "graph",
    ]
    list_filter = [
        ("owner", admin.RelatedOnlyFieldListFilter),
        "mode",
        "status",
        ReceiptFilter,
        OnBehalfFilter,
        "selector",
        "created_at",
    ]
    list_select_related = ["owner", "actor", "confirmed_by"]
    date_hierarchy = "created_at"
    actions = ["export_csv"]
    fields = [
        ("owner", "actor", "confirmed_by"),
        ("selector", "resolved_selector", "threshold"),
        ("mode", "depth", "expire_at"),
        ("status", "outcome"),
        ("created_at", "confirmed_at", "executed_at", "verified_at", "scrubbed_at", "undone_at"),
        "matched_ids",
        "dependent_ids",
        "deleted_ids",
        "explanations",
        "receipt_checks",
        "review",
    ]
    readonly_fields = [name for row in fields for name in (row if not isinstance(row, str) else [row])]

    @admin.display(boolean=True, description="on behalf")
    def on_behalf(self, deletion: DeletionRequest) -> bool:
        return deletion.on_behalf

    @admin.display(description="matched")
    def matched(self, deletion: DeletionRequest) -> int:
        return deletion.matched_count

    @admin.display(description="dependents")
    def dependents(self, deletion: DeletionRequest) -> int:
        return deletion.dependent_count

    @admin.display(description="deleted")
    def deleted(self, deletion: DeletionRequest) -> int:
        return len(deletion.deleted_ids)

    @admin.display(description="verification")
    def verification(self, deletion: DeletionRequest) -> str:
        return verification_text(deletion)

    @admin.display(description="owner's graph")
    def graph(self, deletion: DeletionRequest) -> SafeString:
        url = reverse("admin:provenance_deletionrequest_graph", args=[deletion.owner_id])
        return format_html('<a href="{}">graph</a>', url)

    @admin.display(description="receipt")
    def receipt_checks(self, deletion: DeletionRequest) -> str:
        if deletion.receipt is None:
            return "Not verified (only executed deletions are)."
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
            (
                (name, "—" if check is None else ("passed" if check["passed"] else "FAILED"), check)
                for name, check in deletion.receipt["checks"].items()
            ),
        )
        return format_html("<p>{}</p><table>{}</table>", verification_text(deletion), rows)

    @admin.display(description="data-subject request")
    def review(self, deletion: DeletionRequest) -> str:
        if deletion.status != Status.PREVIEWED:
            return "—"
        url = reverse("admin:provenance_deletionrequest_review", args=[deletion.pk])
        return format_html('<a href="{}">Review and confirm</a>', url)

    @admin.action(description="Export selected deletions as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[DeletionRequest]) -> HttpResponse:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = f'attachment; filename="deletion-audit-{stamp}.csv"'
        writer = csv.writer(response)
        writer.writerow(CSV_COLUMNS)
        for deletion in queryset.select_related("owner", "actor", "confirmed_by").order_by("-created_at", "-id"):
            writer.writerow([_cell(column(deletion)) for column in CSV_COLUMNS.values()])
        return response

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if request.method == "GET":
            failed = DeletionRequest.objects.filter(status=Status.VERIFICATION_FAILED).order_by("-id")
            count = failed.count()
            if count:
                ids = ", ".join(str(pk) for pk in failed.values_list("pk", flat=True)[:20])
                messages.warning(
                    request,
                    f"{count} deletion(s) FAILED verification (ids {ids}{', …' if count > 20 else ''}): "
                    "something they should have removed is still reachable. Open each one's receipt.",
                )
        return super().changelist_view(request, extra_context)

    def get_urls(self) -> list[URLPattern]:
        def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            def page(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                return view(request, self, *args, **kwargs)

            return self.admin_site.admin_view(page)

        name = "provenance_deletionrequest"
        # Before the default URLs, whose `<path:object_id>/` would catch these.
        return [
            path("integrity/", wrap(admin_views.integrity_view), name=f"{name}_integrity"),
            path("subject-request/", wrap(admin_views.subject_request_view), name=f"{name}_subject_request"),
            path("<int:deletion_id>/review/", wrap(admin_views.subject_review_view), name=f"{name}_review"),
            path("graph/<int:user_id>/", wrap(admin_views.graph_view), name=f"{name}_graph"),
            path(
                "graph/<int:user_id>/elements/",
                wrap(admin_views.graph_elements_view),
                name=f"{name}_graph_elements",
            ),
            path(
                "graph/<int:user_id>/threads/",
                wrap(admin_views.graph_threads_view),
                name=f"{name}_graph_threads",
            ),
            path(
                "graph/<int:user_id>/messages/<int:message_id>/",
                wrap(admin_views.graph_message_view),
                name=f"{name}_graph_message",
            ),
            *super().get_urls(),
        ]


# --- Accounts: staff delete a user only through the eraser ----------------------------------------


class ErasingUserAdmin(UserAdmin):
    """Django's user admin, whose delete is the account's erasure (provenance/erasure/account.py).

    Django's own delete would take the messages by foreign-key cascade, past the eraser: no vacuum,
    no index scrub, no receipt. Here the confirmation page is Django's, the deletion the eraser's.
    """

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        # What goes, counted by the eraser's own summary: the rows are the eraser's to delete (staff need no
        # permission on messages or the audit, which nobody deletes by hand), and no message is listed.
        listed: list[Any] = []
        counts: dict[str, int] = {}
        for user in objs:
            summary = account_summary(owner=user)
            listed.append(f"{user} and everything in the account: " + ", ".join(f"{n} {k}" for k, n in summary.items()))
            for kind, n in summary.items():
                counts[kind] = counts.get(kind, 0) + n
        return listed, counts, set(), []

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        account_erase(owner=obj, actor=cast(User, request.user), confirm=obj.get_username())

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for user in queryset:
            account_erase(owner=user, actor=cast(User, request.user), confirm=user.get_username())


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), ErasingUserAdmin)


@admin.register(AccountErasure)
class AccountErasureAdmin(ReadOnlyModelAdmin):
    """The receipts of erased accounts: ids, counts and times."""

    list_display = ["id", "owner_id", "actor_id", "created_at", "erased_at", "scrubbed_at"]
    list_filter = ["created_at"]
    fields = ("owner_id", "actor_id", "counts", "created_at", "erased_at", "scrubbed_at")
    readonly_fields = fields
