import logging
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from chat.models import Message
from provenance.deletions import receipts
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.expiry import deletion_fire
from provenance.deletions.preview import deletion_preview
from provenance.deletions.remove import dependents_remove
from provenance.deletions.undo import deletion_undo
from provenance.models import DeletionRequest
from tests.factories import make_edge, make_message, make_thread, make_user, unit_vector
from tests.helpers import client_for, wait_for

THRESHOLD = settings.DELLM_CONTEXT_THRESHOLD


@pytest.fixture
def chain(thread):
    """fact -> reply, and an unrelated note: each with its own embedding."""
    fact = make_message(thread, "My passport number is X123", embedding=unit_vector(1))
    reply = make_message(thread, "Noted: passport X123", role="assistant", embedding=unit_vector(2))
    make_edge(fact, reply, rank=0, score=1.0)
    note = make_message(thread, "I like jasmine tea", embedding=unit_vector(3))
    return fact, reply, note


def run(owner, mode="soft", **select) -> DeletionRequest:
    preview = deletion_preview(owner=owner, actor=owner, mode=mode, **select)
    return deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner)


def test_soft_deletion_receipt(owner, chain):
    fact = chain[0]
    deletion = run(owner, ids=[fact.pk])
    assert deletion.status == "executed"
    assert deletion.verified_at >= deletion.executed_at
    assert deletion.receipt == {
        "passed": True,
        "failed": [],
        "checks": {
            "taint": {"passed": True, "violations": []},
            "gone": {"passed": True, "checked": 2, "live": []},
            "forget": {
                "passed": True,
                "probes": 2,
                "of": 2,
                "threshold": THRESHOLD,
                "new_neighbours": [],
                "lexical_floor": settings.DELLM_LEXICAL_FLOOR,
                "new_lexical_neighbours": [],
            },
            "purge": None,
            # The note follows the reply in the thread: its index was built from it, and recomputed.
            "indexes": {"passed": True, "recomputed": 1, "stale": []},
        },
    }
    assert DeletionRequest.objects.get(pk=deletion.pk).receipt == deletion.receipt


def test_purge_receipt_checks_the_tombstones(owner, chain):
    deletion = run(owner, mode="purge", exact="passport")
    assert deletion.receipt["checks"]["purge"] == {
        "passed": True,
        "checked": 2,
        "with_content": [],
        "with_embedding": [],
    }
    assert deletion.receipt["checks"]["gone"] == {"passed": True, "checked": 2, "live": []}
    assert deletion.receipt["passed"] is True


def test_receipt_when_an_expiry_fires(owner, chain):
    fact = chain[0]
    when = timezone.now() + timedelta(minutes=5)
    scheduled = run(owner, mode="expire", ids=[fact.pk], expire_at=when)
    assert (scheduled.status, scheduled.receipt) == ("scheduled", None)
    fired = deletion_fire(deletion_id=scheduled.pk, now=when + timedelta(seconds=1))
    assert fired.status == "executed"
    assert fired.receipt["passed"] is True
    assert fired.receipt["checks"]["purge"]["checked"] == 2
    assert fired.receipt["checks"]["forget"]["probes"] == 2


def test_a_neighbour_that_was_there_before_does_not_fail_the_forget_test(owner, thread, chain):
    fact, _, _ = chain
    twin = make_message(thread, "A copy the user keeps", embedding=fact.embedding)
    deletion = run(owner, ids=[fact.pk])
    assert deletion.receipt["passed"] is True
    assert Message.objects.get(pk=twin.pk).status == "active"


def test_no_op_deletion_gets_a_passing_receipt(owner, chain):
    deletion = run(owner, exact="no such words")
    assert (deletion.total, deletion.receipt["passed"], deletion.receipt["checks"]["forget"]["probes"]) == (0, True, 0)


def test_receipt_is_shown_to_the_user(owner, chain):
    fact, _, _ = chain
    api = client_for(owner)
    preview = api.post("/api/deletions/", {"select": {"ids": [fact.pk]}, "mode": "purge"}, format="json").json()
    assert preview["receipt"] is None
    confirmed = api.post(f"/api/deletions/{preview['id']}/confirm/").json()
    assert confirmed["receipt"]["passed"] is True
    assert confirmed["receipt"]["checks"]["purge"]["checked"] == 2
    assert api.get(f"/api/deletions/{preview['id']}/").json()["receipt"] == confirmed["receipt"]
    # Every check the receipt holds is shown whole, the index check and the forget check's lexical side included.
    stored = DeletionRequest.objects.get(pk=preview["id"]).receipt["checks"]
    assert confirmed["receipt"]["checks"] == stored
    assert confirmed["receipt"]["checks"]["indexes"] == {"passed": True, "recomputed": 1, "stale": []}
    assert confirmed["receipt"]["checks"]["forget"]["new_lexical_neighbours"] == []


def behind_the_back(monkeypatch, damage):
    """Make the deletion service run `damage(deletion)` inside its transaction, right after removing Dep(M)."""
    real = dependents_remove

    def apply(**kwargs):
        probe = real(**kwargs)
        damage(kwargs["deletion"])
        return probe

    for caller in ("confirm", "expiry"):
        monkeypatch.setattr(f"provenance.deletions.{caller}.dependents_remove", apply)


def test_an_edge_inserted_behind_the_services_back_fails_loudly(monkeypatch, caplog, owner, thread, chain, client):
    fact, reply, _ = chain
    late = make_message(thread, "A reply that slipped past the owner lock", role="assistant")
    behind_the_back(monkeypatch, lambda deletion: make_edge(reply, late, rank=1))

    with caplog.at_level(logging.INFO, logger="provenance"):
        deletion = run(owner, ids=[fact.pk])

    assert deletion.status == "verification_failed"
    assert DeletionRequest.objects.get(pk=deletion.pk).status == "verification_failed"
    assert (deletion.receipt["passed"], deletion.receipt["failed"]) == (False, ["taint"])
    assert deletion.receipt["checks"]["taint"] == {"passed": False, "violations": [[late.pk, reply.pk]]}
    [error] = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert error.getMessage() == (
        f"deletion {deletion.pk} of owner {owner.pk} FAILED verification ['taint']: "
        f"taint [[{late.pk}, {reply.pk}]], live [], new neighbours [], residue []"
    )

    # The user sees it, confirming again answers the same, and the admin warns.
    body = client_for(owner).get(f"/api/deletions/{deletion.pk}/").json()
    assert (body["status"], body["receipt"]["failed"]) == ("verification_failed", ["taint"])
    again = deletion_confirm(deletion_id=deletion.pk, owner_id=owner.pk, confirmed_by=owner)
    assert (again.status, again.receipt) == ("verification_failed", deletion.receipt)
    staff = owner.__class__.objects.create_user("root", password="pw", is_staff=True, is_superuser=True)
    client.force_login(staff)
    page = client.get(reverse("admin:provenance_deletionrequest_changelist")).content.decode()
    assert f"1 deletion(s) FAILED verification (ids {deletion.pk})" in page
    assert "FAILED: taint" in page
    detail = client.get(reverse("admin:provenance_deletionrequest_change", args=[deletion.pk])).content.decode()
    assert "<th>taint</th><td>FAILED</td>" in detail
    integrity = client.get(reverse("admin:provenance_deletionrequest_integrity")).content.decode()
    assert "I1 is BROKEN: 1 violation." in integrity
    assert f"message {late.pk} has parent {reply.pk} (deleted, removed by deletion {deletion.pk})" in integrity

    # A failed soft deletion can still be undone by its owner.
    assert deletion_undo(deletion_id=deletion.pk, owner_id=owner.pk).status == "undone"


def test_a_live_copy_of_deleted_text_fails_the_forget_test(monkeypatch, owner, thread, chain):
    fact, _, _ = chain
    copies = []

    def copy(deletion):
        copies.append(make_message(thread, fact.content, embedding=fact.embedding))

    behind_the_back(monkeypatch, copy)
    deletion = run(owner, mode="purge", ids=[fact.pk])
    assert deletion.status == "verification_failed"
    assert deletion.receipt["failed"] == ["forget"]
    assert deletion.receipt["checks"]["forget"]["new_neighbours"] == [copies[0].pk]


def test_a_live_message_with_the_deleted_words_fails_the_forget_test(monkeypatch, owner, thread, chain):
    # Far from the fact by embedding, but it would enter a context on its words.
    fact, _, _ = chain
    copies = []

    def copy(deletion):
        copies.append(make_message(thread, "Passport X123, remember?", embedding=unit_vector(40)))

    behind_the_back(monkeypatch, copy)
    deletion = run(owner, mode="purge", ids=[fact.pk])
    assert (deletion.status, deletion.receipt["failed"]) == ("verification_failed", ["forget"])
    forget = deletion.receipt["checks"]["forget"]
    assert (forget["new_neighbours"], forget["new_lexical_neighbours"]) == ([], [copies[0].pk])


def test_words_that_matched_before_the_deletion_do_not_fail_it(owner, thread, chain):
    # An older message sharing the fact's words is not new: the probe compares
    # with what matched just before execution, as it does for embeddings.
    fact, _, _ = chain
    make_message(thread, "Where did I put my passport?", embedding=unit_vector(41))
    deletion = run(owner, mode="purge", ids=[fact.pk])
    assert deletion.receipt["passed"] is True


def test_text_left_in_a_purged_row_fails_the_purge_check(monkeypatch, owner, chain):
    fact, reply, _ = chain
    behind_the_back(monkeypatch, lambda deletion: Message.objects.filter(pk=reply.pk).update(content="left behind"))
    deletion = run(owner, mode="purge", ids=[fact.pk])
    assert (deletion.status, deletion.receipt["failed"]) == ("verification_failed", ["purge"])
    assert deletion.receipt["checks"]["purge"]["with_content"] == [reply.pk]


def test_a_message_that_stays_live_fails_the_gone_check(monkeypatch, owner, chain):
    fact, reply, _ = chain
    behind_the_back(monkeypatch, lambda deletion: Message.objects.filter(pk=reply.pk).update(status="active"))
    deletion = run(owner, ids=[fact.pk])
    assert deletion.status == "verification_failed"
    # A live reply of a deleted message also breaks I1, and its index still holds the deleted words.
    assert deletion.receipt["failed"] == ["forget", "gone", "indexes", "taint"]
    assert deletion.receipt["checks"]["indexes"]["stale"] == [reply.pk]
    assert deletion.receipt["checks"]["gone"]["live"] == [reply.pk]
    assert deletion.receipt["checks"]["taint"]["violations"] == [[reply.pk, fact.pk]]
    assert deletion.receipt["checks"]["forget"]["new_neighbours"] == [reply.pk]


def test_forget_probe_is_bounded_and_starts_with_the_matched_messages(owner, chain, settings):
    from chat.index.vectors import vector_literal
    from provenance.deletions.receipts import forget_probe

    fact, reply, _ = chain
    settings.DELLM_FORGET_PROBES = 1
    probe = forget_probe(owner_id=owner.pk, message_ids={fact.pk, reply.pk}, roots=[reply.pk])
    stored = Message.objects.get(pk=reply.pk).embedding
    assert (probe.vectors, probe.embedded) == ([vector_literal(stored)], 2)
    deletion = run(owner, ids=[fact.pk])
    forget = deletion.receipt["checks"]["forget"]
    assert (forget["probes"], forget["of"], forget["passed"]) == (1, 2, True)


def test_forget_probe_compares_only_vectors_of_the_same_model(owner, thread):
    # Mid-switch (manage.py reembed): the same direction under another model,
    # and another model's 768-d vectors, are never compared with the probe.
    deleted = make_message(thread, "My passport number is X123", embedding=unit_vector(1), embedding_model="new-256d")
    same = make_message(thread, "Noted.", embedding=unit_vector(1), embedding_model="new-256d")
    make_message(thread, "Noted too.", embedding=unit_vector(1), embedding_model="old-256d")
    make_message(thread, "Noted again.", embedding=unit_vector(1, 768), embedding_model="other-768d")
    probe = receipts.forget_probe(owner_id=owner.pk, message_ids={deleted.pk}, roots=[deleted.pk])
    assert (probe.neighbours_before, probe.models) == (frozenset({same.pk}), ["new-256d"])
    deletion = run(owner, ids=[deleted.pk])
    assert (deletion.status, deletion.receipt["passed"]) == ("executed", True)


# --- Verified after confirm returns: the probe read on the deletion's snapshot by a thread. -------


@pytest.fixture
def gate(monkeypatch):
    """Holds the verifying thread before its receipt until released; `done` is set when the receipt is written."""
    release, done = threading.Event(), threading.Event()
    real = receipts.deletion_verify

    def held(**kwargs):
        release.wait(30)
        try:
            return real(**kwargs)
        finally:
            done.set()

    monkeypatch.setattr("provenance.deletions.remove.deletion_verify", held)
    return release, done


def _chain(owner):
    thread = make_thread(owner)
    fact = make_message(thread, "My passport number is X123", embedding=unit_vector(1))
    reply = make_message(thread, "Noted: passport X123", role="assistant", embedding=unit_vector(2))
    make_edge(fact, reply, rank=0, score=1.0)
    make_message(thread, "I like jasmine tea", embedding=unit_vector(3))
    return fact, reply


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["soft", "purge"])
def test_confirm_returns_before_the_receipt_and_the_receipt_follows(gate, mode):
    release, done = gate
    owner = make_user()
    fact, reply = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode=mode, ids=[fact.pk])
    api = client_for(owner)
    body = api.post(f"/api/deletions/{preview.pk}/confirm/").json()
    # Executed and committed, but not yet verified: the receipt never claims what has not been checked.
    assert (body["status"], body["receipt"], body["verified_at"], body["verifying"]) == ("executed", None, None, True)
    assert body["deleted"] == [fact.pk, reply.pk]
    assert set(Message.objects.filter(pk__in=[fact.pk, reply.pk]).values_list("status", flat=True)) == {
        "deleted" if mode == "soft" else "purged"
    }
    assert api.get(f"/api/deletions/{preview.pk}/").json()["verifying"] is True
    release.set()
    assert done.wait(30)
    after = api.get(f"/api/deletions/{preview.pk}/").json()
    assert (after["status"], after["verifying"], after["receipt"]["passed"]) == ("executed", False, True)
    # The probe read on the snapshot saw the embeddings a purge destroyed: both of Dep(M) were probed.
    assert after["receipt"]["checks"]["forget"]["probes"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_copy_made_before_the_receipt_still_fails_it(gate):
    release, done = gate
    owner = make_user()
    fact, _ = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk])
    deletion = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, verify_later=True)
    assert deletion.receipt is None
    # A live copy with no provenance, written after the commit and before the (background) check.
    copy = make_message(fact.thread, "copied passport", embedding=unit_vector(1))
    release.set()
    assert done.wait(30)
    deletion.refresh_from_db()
    assert deletion.status == "verification_failed"
    assert deletion.receipt["checks"]["forget"]["new_neighbours"] == [copy.pk]


@pytest.mark.django_db(transaction=True)
def test_a_deletion_that_fails_midway_changes_nothing_and_gets_no_receipt(gate, monkeypatch):
    release, done = gate
    owner = make_user()
    fact, reply = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk])

    def broken(**kwargs):
        raise RuntimeError("disk full")

    # After the rows are removed, inside the transaction: everything before it must roll back.
    monkeypatch.setattr("provenance.deletions.remove.purge_followups", broken)
    with pytest.raises(RuntimeError):
        deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, verify_later=True)
    release.set()
    assert done.wait(30)
    preview.refresh_from_db()
    assert (preview.status, preview.receipt, preview.deleted_ids) == ("previewed", None, [])
    fact.refresh_from_db()
    reply.refresh_from_db()
    assert (fact.status, fact.content, fact.embedding is not None) == ("active", "My passport number is X123", True)
    assert reply.status == "active"


@pytest.mark.django_db(transaction=True)
def test_without_a_verifying_thread_the_request_verifies(monkeypatch):
    owner = make_user()
    fact, _ = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk])

    class NeverStarts(threading.Thread):
        def start(self):
            pass

    monkeypatch.setattr(receipts, "Thread", NeverStarts)
    monkeypatch.setattr(receipts, "HANDOFF_WAIT_S", 0.01)
    deletion = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, verify_later=True)
    assert deletion.status == "executed"
    assert deletion.receipt["passed"] is True and deletion.receipt["checks"]["forget"]["probes"] == 2
    assert receipts._SLOTS.busy == 0  # the deletion gave back the slot its thread never took


@pytest.mark.django_db(transaction=True)
def test_a_confirm_inside_a_callers_transaction_is_verified_before_it_returns():
    owner = make_user()
    fact, _ = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode="soft", ids=[fact.pk])
    with transaction.atomic():
        deletion = deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, verify_later=True)
        assert deletion.receipt["passed"] is True


@pytest.mark.django_db(transaction=True)
def test_the_probe_read_after_the_purge_committed_still_sees_what_it_destroyed(monkeypatch):
    owner = make_user()
    fact, reply = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk])
    committed, probed = threading.Event(), threading.Event()
    real = receipts.forget_probe

    def late(**kwargs):
        # In the verifying thread: only once the purge has committed (its embeddings are gone for everyone else).
        committed.wait(30)
        try:
            return real(**kwargs)
        finally:
            probed.set()

    monkeypatch.setattr(receipts, "forget_probe", late)
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, verify_later=True)
    assert not Message.objects.filter(pk__in=[fact.pk, reply.pk], embedding__isnull=False).exists()
    committed.set()
    assert probed.wait(30)
    deletion = wait_for(lambda: DeletionRequest.objects.filter(pk=preview.pk, receipt__isnull=False).first())
    assert deletion.receipt["passed"] is True
    assert (deletion.receipt["checks"]["forget"]["probes"], deletion.receipt["checks"]["forget"]["of"]) == (2, 2)


@pytest.mark.django_db(transaction=True)
def test_a_receipt_whose_verifying_thread_stopped_is_written_late_and_fails_the_forget_check(gate):
    release, done = gate  # the thread never gets past its probe: as if its process were killed
    owner = make_user()
    fact, _ = _chain(owner)
    preview = deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk])
    deletion_confirm(deletion_id=preview.pk, owner_id=owner.pk, confirmed_by=owner, verify_later=True)
    assert receipts.deletions_unverified_sweep() == []  # not stale yet
    later = timezone.now() + timedelta(seconds=settings.DELLM_VERIFY_STALE_AFTER + 1)
    assert receipts.deletions_unverified_sweep(now=later) == [preview.pk]
    deletion = DeletionRequest.objects.get(pk=preview.pk)
    assert (deletion.status, deletion.receipt["failed"]) == ("verification_failed", ["forget"])
    forget = deletion.receipt["checks"]["forget"]
    assert (forget["passed"], forget["probes"], forget["not_run"]) == (False, 0, receipts.FORGET_NOT_RUN)
    assert deletion.receipt["checks"]["gone"] == {"passed": True, "checked": 2, "live": []}
    assert deletion.receipt["checks"]["purge"]["passed"] is True
    body = client_for(owner).get(f"/api/deletions/{preview.pk}/").json()
    assert (body["verifying"], body["receipt"]["checks"]["forget"]["not_run"]) == (False, receipts.FORGET_NOT_RUN)
    # The thread coming back late changes nothing: the receipt stands.
    release.set()
    assert done.wait(30)
    assert DeletionRequest.objects.get(pk=preview.pk).receipt == deletion.receipt
    assert receipts.deletions_unverified_sweep(now=later) == []


@pytest.mark.django_db(transaction=True)
def test_past_the_verifying_threads_bound_a_confirm_writes_its_receipt_itself(gate, settings):
    # Each verifying thread holds a connection beside its request: unbounded, a burst of confirms emptied the pool.
    settings.DELLM_VERIFY_THREADS = 1
    # Verifying threads of earlier tests finish first (each gives its slot back as it ends).
    assert wait_for(lambda: receipts._SLOTS.busy == 0)
    release, done = gate
    first, second = make_user(), make_user()
    previews = []
    for owner in (first, second):
        fact, _ = _chain(owner)
        previews.append(deletion_preview(owner=owner, actor=owner, mode="purge", ids=[fact.pk]))
    held = client_for(first).post(f"/api/deletions/{previews[0].pk}/confirm/").json()
    assert (held["verifying"], held["receipt"]) == (True, None)  # its thread holds the one slot
    inline = client_for(second).post(f"/api/deletions/{previews[1].pk}/confirm/").json()
    assert (inline["verifying"], inline["status"], inline["receipt"]["passed"]) == (False, "executed", True)
    release.set()
    assert done.wait(30)
    assert wait_for(lambda: DeletionRequest.objects.get(pk=previews[0].pk).receipt is not None)
