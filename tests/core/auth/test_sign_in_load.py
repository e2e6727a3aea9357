"""A burst of sign-ins checks a bounded number of passwords at once and holds no database connection while it waits.

Found by the soak (`dellm_bench --parts soak`): 50 clients signing in at once held the web
process's whole pool hashing passwords, and 30 of them got 503.
"""

import threading
import time

import pytest
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from rest_framework.test import APIClient

from tests.core.api.test_errors import error_of
from tests.factories import make_user

pytestmark = pytest.mark.usefixtures("fast_hasher")


def _sign_in(username: str):
    return APIClient().post("/api/auth/token/", {"username": username, "password": "pw-for-tests"}, format="json")


def test_sign_ins_beyond_the_concurrency_check_their_passwords_in_turn(transactional_db, monkeypatch):
    names = [f"burst{i}" for i in range(6)]
    for name in names:
        make_user(name)
    monkeypatch.setattr("core.auth.sign_in._password_checks", threading.BoundedSemaphore(2), raising=False)
    checking, most = [0], [0]
    lock = threading.Lock()
    check = AbstractBaseUser.check_password

    def slow_check(self, raw_password):
        with lock:
            checking[0] += 1
            most[0] = max(most[0], checking[0])
        time.sleep(0.3)  # long enough for all six to arrive while the first ones check
        with lock:
            checking[0] -= 1
        return check(self, raw_password)

    monkeypatch.setattr(AbstractBaseUser, "check_password", slow_check)
    statuses = {}

    def sign_in(name: str) -> None:
        try:
            statuses[name] = _sign_in(name).status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_in, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert statuses == dict.fromkeys(names, 200)
    assert most[0] == 2


def test_a_sign_in_that_waited_in_vain_is_a_503_with_retry_after_and_no_query(
    owner, monkeypatch, settings, django_assert_num_queries
):
    busy = threading.BoundedSemaphore(1)
    busy.acquire()
    monkeypatch.setattr("core.auth.sign_in._password_checks", busy, raising=False)
    settings.DELLM_SIGN_IN_WAIT = 0

    with django_assert_num_queries(0):
        response = _sign_in("alice")

    assert error_of(response, 503)["code"] == "service_unavailable"
    assert response["Retry-After"] == "5"
    busy.release()
    assert _sign_in("alice").status_code == 200
