from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Permission

from provenance import services
from tests.factories import make_edge, make_message, make_user, unit_vector
from tests.worker.conftest import start_worker  # noqa: F401  (the residue test runs a real worker)

# Purged in `history`: no admin page may show it.
SECRET_WORD = "Zanzibar-4471"
SECRET = f"my tortoise is called {SECRET_WORD}"
KEPT = "I like jasmine tea"


@pytest.fixture
def staff(db):
    """A superuser: every admin permission, including data-subject deletions."""
    return make_user("root", is_staff=True, is_superuser=True)


@pytest.fixture
def clerk(db):
    """Staff who may read the deletion audit and nothing else."""
    user = make_user("clerk", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_deletionrequest"))
    return user


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def history(owner, thread):
    """A purged secret (with a reply built from it), a soft deletion, a pending preview and a live message."""
    secret = make_message(thread, SECRET, embedding=unit_vector(1))
    reply = make_message(thread, f"Noted: {SECRET}", role="assistant", embedding=unit_vector(2))
    make_edge(secret, reply, rank=0, score=1.0)
    kept = make_message(thread, KEPT, embedding=unit_vector(3))
    lyon = make_message(thread, "I live in Lyon", embedding=unit_vector(4))
    purge = services.deletion_preview(owner=owner, actor=owner, mode="purge", exact=SECRET_WORD)
    purge = services.deletion_confirm(deletion_id=purge.pk, owner_id=owner.pk, confirmed_by=owner)
    soft = services.deletion_preview(owner=owner, actor=owner, mode="soft", ids=[lyon.pk])
    soft = services.deletion_confirm(deletion_id=soft.pk, owner_id=owner.pk, confirmed_by=owner)
    pending = services.deletion_preview(owner=owner, actor=owner, mode="soft", ids=[kept.pk])
    return SimpleNamespace(
        secret=secret, reply=reply, kept=kept, lyon=lyon, purge=purge, soft=soft, pending=pending, thread=thread
    )
