import pytest

from dellm_site.celery import app as celery_app
from tests.factories import make_thread, make_user


@pytest.fixture(autouse=True)
def _celery_eager(request):
    """Run tasks in-process unless a test starts a real worker (marker `worker`)."""
    eager = request.node.get_closest_marker("worker") is None
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = eager
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def owner(db):
    return make_user("alice")


@pytest.fixture
def other_owner(db):
    return make_user("bob")


@pytest.fixture
def thread(owner):
    return make_thread(owner, "main")
