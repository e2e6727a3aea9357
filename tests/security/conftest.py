import pytest


@pytest.fixture(autouse=True)
def _fast_hasher(settings):
    """These tests sign in dozens of times; PBKDF2 would spend a second on each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
