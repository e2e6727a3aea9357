"""Password guessing is bounded and API tokens are hashed, expiring and revocable."""

import datetime

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from tests.core.api.test_errors import error_of
from tests.factories import make_user

LIMIT = 5
pytestmark = pytest.mark.usefixtures("fast_hasher")


def _token(client: APIClient, password: str = "pw-for-tests"):
    return client.post("/api/auth/token/", {"username": "alice", "password": password}, format="json")


def test_token_endpoint_locks_the_username_out_after_repeated_failures(owner):
    client = APIClient()
    for _ in range(LIMIT - 1):
        assert error_of(_token(client, "wrong"), 400)["code"] == "validation_error"
    locked = error_of(_token(client, "wrong"), 429)
    assert locked["code"] == "locked_out"
    # Locked means locked: the right password does not get through either, from anywhere.
    assert error_of(_token(APIClient(REMOTE_ADDR="10.9.8.7"), "pw-for-tests"), 429)["code"] == "locked_out"
    assert _token(APIClient()).get("Retry-After") == str(15 * 60)


def test_sign_in_page_locks_the_username_out(owner):
    client = Client()
    for _ in range(LIMIT - 1):
        assert client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code == 200
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests"})
    assert response.status_code == 302  # signed in: a success resets the count
    client = Client()
    for _ in range(LIMIT):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests"})
    assert response.status_code == 429
    assert b"Too many failed sign-ins" in response.content
    assert "_auth_user_id" not in client.session


def test_admin_login_locks_the_username_out(db):
    make_user("root", is_staff=True, is_superuser=True)
    client = Client()
    for _ in range(LIMIT):
        client.post("/admin/login/", {"username": "root", "password": "wrong"})
    response = client.post("/admin/login/?next=/admin/", {"username": "root", "password": "pw-for-tests"})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize("password", ["password123", "qwertyuiop", "83920174651"])
def test_common_and_numeric_passwords_are_refused(db, password):
    with pytest.raises(ValidationError):
        validate_password(password)


def test_demo_user_only_in_development(db):
    from django.contrib.auth import get_user_model

    with override_settings(DEBUG=False), pytest.raises(CommandError):
        call_command("dellm_demo_user")
    assert not get_user_model().objects.filter(username="demo").exists()
    with override_settings(DEBUG=True):
        call_command("dellm_demo_user")
    assert get_user_model().objects.filter(username="demo").exists()


def _sign_in(owner) -> tuple[APIClient, str]:
    token = _token(APIClient()).json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client, token


def test_tokens_are_stored_hashed_and_expire(owner):
    from knox.models import AuthToken

    response = _token(APIClient())
    assert response.status_code == 200
    token = response.json()["token"]
    stored = AuthToken.objects.get(user=owner)
    assert token not in {stored.digest, stored.token_key}
    assert len(stored.digest) == 128 and stored.digest != token
    expiry = datetime.datetime.fromisoformat(response.json()["expiry"])
    assert timezone.now() + datetime.timedelta(days=29) < expiry <= timezone.now() + datetime.timedelta(days=30)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/threads/").status_code == 200
    AuthToken.objects.filter(pk=stored.pk).update(expiry=timezone.now() - datetime.timedelta(seconds=1))
    assert error_of(client.get("/api/threads/"), 401)["code"] == "authentication_failed"


def test_bearer_keyword_takes_the_same_token(owner):
    _, token = _sign_in(owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/threads/").status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}x")
    assert error_of(client.get("/api/threads/"), 401)["code"] == "authentication_failed"


def test_sign_out_revokes_the_token(owner):
    client, _ = _sign_in(owner)
    other, _ = _sign_in(owner)
    assert client.post("/api/auth/logout/").status_code == 204
    assert error_of(client.get("/api/threads/"), 401)["code"] == "authentication_failed"
    assert other.get("/api/threads/").status_code == 200
    assert other.post("/api/auth/logoutall/").status_code == 204
    assert error_of(other.get("/api/threads/"), 401)["code"] == "authentication_failed"


def test_password_change_revokes_every_token(owner):
    client, _ = _sign_in(owner)
    owner.set_password("a much better passphrase")
    owner.save()
    assert error_of(client.get("/api/threads/"), 401)["code"] == "authentication_failed"


def test_admin_lists_tokens_without_their_secret(owner):
    root = make_user("root", is_staff=True, is_superuser=True)
    _, token = _sign_in(owner)
    admin = Client()
    admin.force_login(root)
    page = admin.get("/admin/knox/authtoken/")
    assert page.status_code == 200
    assert b"alice" in page.content
    assert token.encode() not in page.content


def test_tokens_per_user_are_bounded(owner, settings):
    from knox.models import AuthToken

    settings.DELLM_TOKEN_LIMIT_PER_USER = 2
    first, _second, third = (_sign_in(owner)[0] for _ in range(3))
    assert AuthToken.objects.filter(user=owner).count() == 2
    assert error_of(first.get("/api/threads/"), 401)["code"] == "authentication_failed"
    assert third.get("/api/threads/").status_code == 200
