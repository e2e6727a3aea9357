import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """The chat throttle counts in the cache; each test starts with none used."""
    cache.clear()
    yield
    cache.clear()


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def api(owner) -> APIClient:
    return client_for(owner)


@pytest.fixture
def other_api(other_owner) -> APIClient:
    return client_for(other_owner)
