import pytest

from tests.factories import make_thread, make_user


@pytest.fixture
def owner(db):
    return make_user("alice")


@pytest.fixture
def other_owner(db):
    return make_user("bob")


@pytest.fixture
def thread(owner):
    return make_thread(owner, "main")
