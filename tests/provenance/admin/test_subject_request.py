from django.urls import reverse

from chat.models import Message
from provenance.dependents import taint_violations
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread, unit_vector
from tests.helpers import client_for

REQUEST = reverse("admin:provenance_deletionrequest_subject_request")
PHRASE = "Zanzibar-4471"


def review_url(deletion) -> str:
    return reverse("admin:provenance_deletionrequest_review", args=[deletion.pk])


def test_staff_purges_on_a_users_behalf_through_preview_and_confirmation(staff_client, staff, owner, thread):
    fact = make_message(thread, f"my tortoise is called {PHRASE}", embedding=unit_vector(1))
    reply = make_message(thread, "Noted, a fine name.", role="assistant", embedding=unit_vector(2))
    make_edge(fact, reply, rank=0, score=1.0)
    other = make_message(thread, "I like jasmine tea", embedding=unit_vector(3))

    form = staff_client.get(f"{REQUEST}?owner={owner.pk}")
    assert form.status_code == 200
    assert form.context["form"].initial["owner"] == str(owner.pk)
    response = staff_client.post(REQUEST, {"owner": owner.pk, "selector": "exact", "value": PHRASE, "mode": "purge"})
    deletion = DeletionRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == review_url(deletion)
    assert (deletion.owner, deletion.actor, deletion.status, deletion.on_behalf) == (owner, staff, "previewed", True)
    assert (deletion.matched_ids, deletion.dependent_ids) == ([fact.pk], [reply.pk])
    # The phrase selected the messages and was dropped.
    row = DeletionRequest.objects.filter(pk=deletion.pk).values().get()
    assert PHRASE not in repr(row) and "tortoise" not in repr(row)
    assert Message.objects.get(pk=fact.pk).status == "active"

    review = staff_client.get(review_url(deletion))
    assert review.status_code == 200
    assert [member["id"] for member in review.context["members"]] == [fact.pk, reply.pk]
    body = review.content.decode()
    assert "Confirm: purge 2 messages" in body and f"via {fact.pk} → {reply.pk}" in body
    assert PHRASE not in body

    done = staff_client.post(review_url(deletion), {"action": "confirm"}, follow=True)
    deletion.refresh_from_db()
    assert done.redirect_chain == [(reverse("admin:provenance_deletionrequest_change", args=[deletion.pk]), 302)]
    assert (deletion.status, deletion.confirmed_by, deletion.deleted_ids) == ("executed", staff, [fact.pk, reply.pk])
    assert deletion.receipt["passed"] is True
    assert f"Deletion {deletion.pk}: executed. purged 2 messages" in done.content.decode()
    assert set(Message.objects.filter(pk__in=[fact.pk, reply.pk]).values_list("status", "content")) == {("purged", "")}
    assert Message.objects.get(pk=other.pk).status == "active"
    assert taint_violations(owner_id=owner.pk) == []

    # Recorded as done on the owner's behalf: in the audit, its filter and CSV, and the owner's own history.
    changelist = reverse("admin:provenance_deletionrequest_changelist")
    assert list(staff_client.get(f"{changelist}?on_behalf=yes").context["cl"].result_list) == [deletion]
    csv = staff_client.post(changelist, {"action": "export_csv", "_selected_action": [str(deletion.pk)]})
    assert f"root (#{staff.pk}),root (#{staff.pk}),yes," in csv.content.decode()
    [mine] = client_for(owner).get("/api/deletions/").json()
    assert (mine["id"], mine["status"], mine["receipt"]["passed"]) == (deletion.pk, "executed", True)


def test_staff_can_cancel_a_data_subject_preview(staff_client, owner, thread):
    fact = make_message(thread, "I live in Lyon")
    staff_client.post(REQUEST, {"owner": owner.pk, "selector": "ids", "value": f"{fact.pk}", "mode": "soft"})
    deletion = DeletionRequest.objects.get()
    response = staff_client.post(review_url(deletion), {"action": "cancel"})
    assert response.status_code == 302
    deletion.refresh_from_db()
    assert (deletion.status, Message.objects.get(pk=fact.pk).status) == ("cancelled", "active")
    assert "Confirm" not in staff_client.get(review_url(deletion)).content.decode()


def test_confirming_twice_or_a_cancelled_request_changes_nothing(staff_client, owner, thread):
    fact = make_message(thread, "I live in Lyon")
    staff_client.post(REQUEST, {"owner": owner.pk, "selector": "ids", "value": str(fact.pk), "mode": "soft"})
    deletion = DeletionRequest.objects.get()
    staff_client.post(review_url(deletion), {"action": "cancel"})
    response = staff_client.post(review_url(deletion), {"action": "confirm"}, follow=True)
    assert "it can no longer be confirmed" in response.content.decode()
    assert Message.objects.get(pk=fact.pk).status == "active"
    assert staff_client.post(review_url(deletion), {"action": "explode"}).status_code == 400


def test_bad_selections_are_form_errors(staff_client, owner, other_owner, thread):
    mine = make_message(thread, "I live in Lyon")
    not_owned = make_message(make_thread(other_owner), "bob's note")
    cases = [
        ({"selector": "ids", "value": "12 abc"}, "Give message ids"),
        ({"selector": "ids", "value": str(not_owned.pk)}, f"No message with id {not_owned.pk}."),
        ({"selector": "exact", "value": "   "}, "The phrase to delete is empty."),
        ({"selector": "ids", "value": str(mine.pk), "mode": "expire"}, "mode &#x27;expire&#x27; needs expire_at"),
    ]
    for fields, error in cases:
        response = staff_client.post(REQUEST, {"owner": owner.pk, "mode": "soft", **fields})
        assert response.status_code == 200
        assert error in response.content.decode(), fields
    assert DeletionRequest.objects.count() == 0


def test_data_subject_requests_need_their_permission(client, clerk, owner, thread):
    fact = make_message(thread, "I live in Lyon")
    client.force_login(clerk)
    assert client.get(REQUEST).status_code == 403
    response = client.post(REQUEST, {"owner": owner.pk, "selector": "ids", "value": str(fact.pk), "mode": "purge"})
    assert response.status_code == 403
    assert DeletionRequest.objects.count() == 0
    changelist = client.get(reverse("admin:provenance_deletionrequest_changelist")).content.decode()
    assert "Data-subject request" not in changelist
