"""Staff pages inside the admin: the I1 integrity check, a user's provenance
graph, and deletions run on a user's behalf (data-subject requests).

`DeletionRequestAdmin.get_urls` mounts them behind `admin_site.admin_view`
(active staff only); each view also checks its own permission. Like the rest
of the audit, they show ids, counts and statuses; the graph shows a user's
messages, the same data as the message admin.
"""

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, Q
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse

from chat.models import Message
from chat.selectors import message_get, thread_list
from chat.serializers import MessageSerializer, ThreadSerializer
from core.api.client_input import whole_number
from core.errors import DomainError, error_body
from core.types import StaffRequest, User
from provenance.api.serializers.graph import GraphQuerySerializer, graph_body
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.expiry import deletion_cancel
from provenance.deletions.preview import deletion_preview
from provenance.dependents import taint_violations
from provenance.graph import graph_window
from provenance.models import DeletionRequest

VIEW_AUDIT = "provenance.view_deletionrequest"
VIEW_MESSAGES = "chat.view_message"
RUN_SUBJECT_DELETION = "provenance.run_subject_deletion"


def _require(request: StaffRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied


def _page(
    request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]", template: str, title: str, **context: Any
) -> TemplateResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        **context,
    }
    return TemplateResponse(request, f"admin/provenance/{template}", context)


# --- Integrity: invariant I1 per user -----------------------------------------


def integrity_view(request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]") -> HttpResponse:
    """Every user's live, deleted and purged counts, and every I1 violation (there should be none).

    `taint_violations()` without an owner runs the per-user check for all
    users in one query; its rows are grouped by owner here.
    """
    _require(request, VIEW_AUDIT)
    found = defaultdict(list)
    for owner_id, message_id, parent_id in taint_violations():
        found[owner_id].append((message_id, parent_id))
    parents = {
        row["pk"]: row
        for row in Message.objects.filter(pk__in={p for pairs in found.values() for _, p in pairs}).values(
            "pk", "status", "deleted_by_id"
        )
    }
    live = Q(messages__status__in=Message.LIVE)
    users = (
        get_user_model()
        .objects.filter(messages__isnull=False)
        .annotate(
            live=Count("messages", filter=live),
            deleted=Count("messages", filter=Q(messages__status=Message.Status.DELETED)),
            purged=Count("messages", filter=Q(messages__status=Message.Status.PURGED)),
        )
        .order_by("username")
    )
    rows = [
        {
            "user": user,
            "live": user.live,
            "deleted": user.deleted,
            "purged": user.purged,
            "violations": [
                {"message": message_id, "parent": parent_id, **parents[parent_id]}
                for message_id, parent_id in found.get(user.pk, [])
            ],
        }
        for user in users
    ]
    total = sum(len(pairs) for pairs in found.values())
    return _page(request, model_admin, "integrity.html", "Integrity: invariant I1", rows=rows, total=total)


# --- A user's provenance graph ------------------------------------------------


def _subject(user_id: int) -> User:
    return get_object_or_404(get_user_model(), pk=user_id)


def graph_view(request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]", user_id: int) -> HttpResponse:
    """The browser's graph explorer, read-only, over the staff JSON endpoints below."""
    _require(request, VIEW_MESSAGES)
    return _page(request, model_admin, "graph.html", "Provenance graph", subject=_subject(user_id))


def _json(produce: Callable[[], Any]) -> JsonResponse:
    try:
        return JsonResponse(produce(), safe=False)
    except DomainError as error:
        return JsonResponse(error_body(error.code, error.message, error.fields), status=error.status)


def graph_elements_view(
    request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]", user_id: int
) -> HttpResponse:
    """The user's graph as Cytoscape.js elements: the shape of /api/graph/."""
    _require(request, VIEW_MESSAGES)
    owner = _subject(user_id)
    query = GraphQuerySerializer(data=request.GET)
    if not query.is_valid():
        fields = {name: " ".join(problems) for name, problems in query.errors.items()}
        return JsonResponse(error_body("validation_error", "Invalid graph query.", fields), status=400)

    def elements() -> Any:
        # The same window as the API's graph: a heavy history stays bounded here too.
        window = graph_window(
            owner=owner,
            thread_id=query.validated_data.get("thread"),
            include_deleted=query.validated_data["include_deleted"],
            before=query.validated_data.get("before"),
            limit=query.validated_data.get("limit") or settings.DELLM_GRAPH_WINDOW,
            max_edges=settings.DELLM_GRAPH_MAX_EDGES,
        )
        return graph_body(window, next_url=None, staff=True)

    return _json(elements)


def graph_message_view(
    request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]", user_id: int, message_id: int
) -> HttpResponse:
    _require(request, VIEW_MESSAGES)
    owner = _subject(user_id)
    return _json(
        lambda: MessageSerializer(message_get(owner=owner, message_id=message_id), context={"staff": True}).data,
    )


def graph_threads_view(request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]", user_id: int) -> HttpResponse:
    _require(request, VIEW_MESSAGES)
    owner = _subject(user_id)
    live = Message.objects.filter(owner=owner, thread=OuterRef("pk"), status__in=Message.LIVE)
    threads = thread_list(owner=owner).annotate(has_live=Exists(live))
    return _json(lambda: ThreadSerializer(threads, many=True, context={"staff": True}).data)


# --- Data-subject requests: preview, then confirm, on a user's behalf ----------


class SubjectDeletionForm(forms.Form):
    owner = forms.ModelChoiceField(queryset=get_user_model().objects.order_by("username"), label="Data subject")
    selector = forms.ChoiceField(
        choices=[("ids", "Message ids"), ("exact", "Exact phrase"), ("semantic", "Semantic match")]
    )
    value = forms.CharField(
        label="Selection",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "autocomplete": "off"}),
        help_text="Message ids separated by spaces or commas, a phrase, or text matched by meaning. "
        "It selects the messages for the preview and is then dropped: it is never stored.",
    )
    threshold = forms.FloatField(required=False, min_value=-1, max_value=1, help_text="Semantic match only.")
    mode = forms.ChoiceField(choices=DeletionRequest.Mode.choices, initial=DeletionRequest.Mode.SOFT)
    expire_at = forms.DateTimeField(required=False, help_text="Mode expire only.")
    depth = forms.IntegerField(
        required=False, min_value=0, max_value=2**31 - 1, help_text="Taint level limit; empty for the full Dep(M)."
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data
        kind, value = data.get("selector"), data.get("value")
        if kind == "ids" and value is not None:
            tokens = [token for token in re.split(r"[\s,]+", value) if token]
            ids = [whole_number(token, digits=19) for token in tokens]
            if not ids or None in ids:
                self.add_error("value", "Give message ids: whole numbers separated by spaces or commas.")
            else:
                data["selection"] = {"ids": ids}
        elif kind and value is not None:
            data["selection"] = {kind: value}
            if kind == "semantic" and data.get("threshold") is not None:
                data["selection"]["threshold"] = data["threshold"]
        return data


def subject_request_view(request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]") -> HttpResponse:
    """Preview a deletion of a user's messages, asked by staff (`actor`) for that user (`owner`)."""
    _require(request, RUN_SUBJECT_DELETION)
    form = SubjectDeletionForm(request.POST or None, initial={"owner": request.GET.get("owner")})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            deletion = deletion_preview(
                owner=data["owner"],
                actor=request.user,
                mode=data["mode"],
                depth=data["depth"],
                expire_at=data["expire_at"],
                # Staff delete whole messages; a redaction is the user's own choice.
                offer_redactions=False,
                **data["selection"],
            )
        except DomainError as error:
            form.add_error(None, error.message)
        else:
            return redirect("admin:provenance_deletionrequest_review", deletion.pk)
    return _page(request, model_admin, "subject_request.html", "Data-subject deletion request", form=form)


def _members(deletion: DeletionRequest) -> list[dict]:
    """Matched and dependent messages in sequence order: ids, roles, statuses and paths, no text."""
    paths = {int(node): path for node, path in deletion.explanations.items()}
    ids = [*deletion.matched_ids, *deletion.dependent_ids]
    rows = Message.objects.filter(owner_id=deletion.owner_id, pk__in=ids).order_by("seq")
    return [
        {"id": pk, "seq": seq, "role": role, "status": status, "path": paths.get(pk)}
        for pk, seq, role, status in rows.values_list("pk", "seq", "role", "status")
    ]


def subject_review_view(
    request: StaffRequest, model_admin: "ModelAdmin[DeletionRequest]", deletion_id: int
) -> HttpResponse:
    """Show a preview; POST `action=confirm` executes it as this staff member, `action=cancel` drops it."""
    _require(request, RUN_SUBJECT_DELETION)
    deletion = get_object_or_404(DeletionRequest.objects.select_related("owner", "actor"), pk=deletion_id)
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "confirm":
                deletion = deletion_confirm(
                    deletion_id=deletion.pk, owner_id=deletion.owner_id, confirmed_by=request.user
                )
            elif action == "cancel":
                deletion = deletion_cancel(deletion_id=deletion.pk, owner_id=deletion.owner_id)
            else:
                return HttpResponseBadRequest("Unknown action.")
        except DomainError as error:
            messages.error(request, error.message)
            return redirect("admin:provenance_deletionrequest_review", deletion.pk)
        if deletion.status == DeletionRequest.Status.VERIFICATION_FAILED:
            assert deletion.receipt is not None  # a failed verification always leaves its receipt
            failed = ", ".join(deletion.receipt["failed"])
            messages.error(request, f"Deletion {deletion.pk} FAILED verification: {failed}.")
        else:
            messages.success(request, f"Deletion {deletion.pk}: {deletion.status}. {deletion.outcome}")
        return redirect("admin:provenance_deletionrequest_change", deletion.pk)
    return _page(
        request,
        model_admin,
        "subject_review.html",
        f"Review deletion {deletion.pk}",
        deletion=deletion,
        members=_members(deletion),
        matched=set(deletion.matched_ids),
    )
