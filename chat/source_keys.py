"""Keys of imported conversations and messages after a purge: keyed digests, never the key itself.

An imported thread and message keep their id in the other tool
(`Thread.source_id`, `Message.source_id`), so importing the same file again
adds nothing. Such a key can be text (a JSONL `conversation` is whatever the
file says, "divorce-lawyer" as well as a UUID), so a purge replaces the keys
of what it touched by an HMAC-SHA256 of the key under the server secret
(the eraser, `provenance/erasure/`, calls `chat.imports.scrub.purged_imports_scrub`). The
importer matches a file's keys against both the plain keys and their digests
(`stored_keys`), so a purged message is found again by its digest and stays
purged: re-importing the file brings none of it back.

The digest is keyed by the owner too: the same key of two users gives two
digests. Someone who holds the database *and* the secret can confirm a guessed
key; without the secret, a digest says nothing. Rotating the secret keeps the
old one in `SECRET_KEY_FALLBACKS` for as long as re-imports must still match
(a digest under a dropped secret no longer matches, and the file's purged
messages would import again as new ones).
"""

import re
from collections.abc import Iterable

from django.conf import settings
from django.utils.crypto import salted_hmac

PREFIX = "purged:"
_SALT = "dellm.chat.source_keys"
_DIGEST = re.compile(re.escape(PREFIX) + "[0-9a-f]{64}")


def _digest(owner_id: int, key: str, secret: str | bytes) -> str:
    return PREFIX + salted_hmac(_SALT, f"{int(owner_id)}\x00{key}", secret=secret, algorithm="sha256").hexdigest()


def is_digest(value: str) -> bool:
    return re.fullmatch(_DIGEST, value) is not None


def source_key_digest(*, owner_id: int, key: str) -> str:
    """What a purge stores in place of `key` (a digest stays a digest)."""
    if is_digest(key):
        return key
    return _digest(owner_id, key, settings.SECRET_KEY)


def stored_keys(*, owner_id: int, keys: Iterable[str]) -> dict[str, str]:
    """{value a row may hold: the file's key} for `keys`: the key itself and its digest under each secret."""
    found: dict[str, str] = {}
    for key in keys:
        found[key] = key
        for secret in [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]:
            found[_digest(owner_id, key, secret)] = key
    return found
