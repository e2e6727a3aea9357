"""The two attacks on password guessing, at every sign-in door.

The doors that take a password: `POST /api/auth/token/`, the sign-in page
(`/accounts/login/`) and the admin login (`/admin/login/`). `/v1` and every
other API call take a token, never a password.

1. **Resetting the victim's count.** django-axes' `AXES_RESET_ON_SUCCESS`
   (database handler, `reset_user_attempts`) deletes every failure record that
   matches the succeeding sign-in by *any* lock-out parameter, so with
   `["username", "ip_address"]` a success deleted every record of its address,
   the victim's too: four wrong passwords for the victim, one good sign-in to
   the attacker's own account from the same address, repeat, and the victim
   was never locked. It worked at all three doors (each sends
   `user_logged_in`). DeLLM's handler (core/auth/sign_in.py) forgets only the
   succeeding username's own failures.
2. **Rotating `X-Forwarded-For`.** DRF's throttles, with no `NUM_PROXIES`,
   keyed an anonymous client on the whole header, so a new header value was a
   new client and the `auth` limit (20/min) never bit. The lock-out itself
   was not bypassed: django-ipware is not installed, so django-axes read
   REMOTE_ADDR only (its AXES_IPWARE_* settings did nothing) - the test of
   that stays. Both now take the client address from one function
   (`core.auth.sign_in.client_address`): REMOTE_ADDR, or, behind
   DELLM_TRUSTED_PROXIES proxies, the address the outermost one saw.
   The sign-in page and the admin have no throttle (the lock-out bounds them).
"""

from dataclasses import dataclass

import pytest
from axes.models import AccessAttempt
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import make_user

pytestmark = pytest.mark.usefixtures("fast_hasher")

LIMIT = 5
PASSWORD = "pw-for-tests"
ATTACKER = "10.0.0.66"


@dataclass(frozen=True)
class Door:
    name: str
    path: str
    signed_in: int
    refused: int

    def client(self, address: str = ATTACKER) -> Client:
        return APIClient(REMOTE_ADDR=address) if self.name == "token" else Client(REMOTE_ADDR=address)

    def sign_in(self, client: Client, username: str, password: str, **headers: str) -> int:
        data = {"username": username, "password": password}
        if self.name == "token":
            return client.post(self.path, data, format="json", headers=headers).status_code
        return client.post(self.path, data, headers=headers).status_code


DOORS = [
    Door("token", "/api/auth/token/", signed_in=200, refused=400),
    Door("page", "/accounts/login/", signed_in=302, refused=200),
    Door("admin", "/admin/login/?next=/admin/", signed_in=302, refused=200),
]


@pytest.fixture
def accounts(db):
    # Staff, so that both can sign in at the admin door too (an insider attacking a colleague).
    return make_user("alice", is_staff=True), make_user("mallory", is_staff=True)


@pytest.mark.parametrize("door", DOORS, ids=lambda door: door.name)
def test_own_successful_sign_ins_do_not_reset_the_victims_failures(accounts, door):
    attacker = door.client()
    outcomes = []
    for _ in range(3):
        outcomes += [door.sign_in(attacker, "alice", "wrong") for _ in range(LIMIT - 1)]
        outcomes.append(door.sign_in(attacker, "mallory", PASSWORD))
    # The first round goes as the attacker planned: four refusals, then in.
    assert outcomes[:LIMIT] == [door.refused] * (LIMIT - 1) + [door.signed_in]
    # Alice's failures were kept: she is locked out, her own right password too, from anywhere.
    assert door.sign_in(door.client("10.9.9.9"), "alice", PASSWORD) == 429


@pytest.mark.parametrize("door", DOORS, ids=lambda door: door.name)
def test_a_success_still_forgets_the_users_own_failures(accounts, door):
    client = door.client()
    assert [door.sign_in(client, "alice", "wrong") for _ in range(LIMIT - 1)] == [door.refused] * (LIMIT - 1)
    assert door.sign_in(client, "alice", PASSWORD) == door.signed_in
    assert not AccessAttempt.objects.filter(username="alice").exists()
    assert [door.sign_in(client, "alice", "wrong") for _ in range(LIMIT - 1)] == [door.refused] * (LIMIT - 1)
    assert door.sign_in(client, "alice", PASSWORD) == door.signed_in


@pytest.mark.parametrize("door", DOORS, ids=lambda door: door.name)
def test_rotating_x_forwarded_for_does_not_escape_the_address_lock_out(accounts, door):
    client = door.client()
    for n in range(LIMIT):
        door.sign_in(client, f"nobody{n}", "wrong", X_Forwarded_For=f"198.51.100.{n}")
    assert door.sign_in(client, "mallory", PASSWORD, X_Forwarded_For="198.51.100.99") == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}


def test_rotating_x_forwarded_for_does_not_escape_the_auth_throttle(accounts, settings):
    settings.AXES_FAILURE_LIMIT = 1000  # the throttle alone, not the lock-out
    door, client = DOORS[0], APIClient(REMOTE_ADDR=ATTACKER)
    tries = [door.sign_in(client, "alice", "wrong", X_Forwarded_For=f"198.51.100.{n}") for n in range(21)]
    assert tries == [400] * 20 + [429]
    # Another client is counted on its own.
    assert door.sign_in(APIClient(REMOTE_ADDR="10.9.9.9"), "alice", PASSWORD) == 200


def test_behind_trusted_proxies_the_outermost_proxys_client_counts(accounts, settings):
    settings.DELLM_TRUSTED_PROXIES = 2
    settings.AXES_FAILURE_LIMIT = 1000
    door, proxy = DOORS[0], APIClient(REMOTE_ADDR="10.0.0.2")

    def via_proxies(client_address: str, spoofed: str) -> int:
        # What the client sent, then what each of the two proxies appended (the nearer one last).
        chain = f"{spoofed}, {client_address}, 10.0.0.1"
        return door.sign_in(proxy, "alice", "wrong", X_Forwarded_For=chain)

    assert [via_proxies("203.0.113.7", f"192.0.2.{n}") for n in range(21)] == [400] * 20 + [429]
    assert via_proxies("203.0.113.8", "192.0.2.1") == 400
    assert sorted(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["203.0.113.7", "203.0.113.8"]


def test_a_proxy_chain_shorter_or_stranger_than_configured_is_no_500(accounts, settings):
    settings.DELLM_TRUSTED_PROXIES = 1
    door, client = DOORS[0], APIClient(REMOTE_ADDR="10.0.0.2")
    assert door.sign_in(client, "alice", "wrong", X_Forwarded_For="not-an-address") == 400
    assert door.sign_in(client, "alice", "wrong", X_Forwarded_For="") == 400
    # Not an address: the proxy's own is recorded instead.
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.0.0.2"}
