"""Test data, built through the same models the services write."""

import itertools

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Max

from chat.models import ContextEdge, Message, Thread

_names = itertools.count(1)


def make_user(username: str | None = None, **extra):
    return get_user_model().objects.create_user(
        username=username or f"user{next(_names)}", password="pw-for-tests", **extra
    )


def make_thread(owner, title: str = "") -> Thread:
    return Thread.objects.create(owner=owner, title=title)


def make_message(thread: Thread, content: str = "", role: str = "user", embedding=None, **extra) -> Message:
    seq = (Message.objects.filter(owner_id=thread.owner_id).aggregate(m=Max("seq"))["m"] or 0) + 1
    return Message.objects.create(
        owner_id=thread.owner_id,
        thread=thread,
        seq=seq,
        role=role,
        content=content or f"message {seq}",
        embedding=embedding,
        # A vector records the model that made it, as the services do: deletion
        # selection and retrieval compare only vectors of the configured model.
        **({"embedding_model": settings.DELLM_EMBEDDING_MODEL} if embedding is not None else {}) | extra,
    )


def make_edge(source: Message, target: Message, rank: int = 1, score: float = 0.5) -> ContextEdge:
    return ContextEdge.objects.create(owner_id=source.owner_id, source=source, target=target, rank=rank, score=score)


def unit_vector(seed: int, dim: int = 256) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(dim)
    return (vector / np.linalg.norm(vector)).tolist()


# The admin's `history` (tests/conftest.py): purged there, so no admin page may show it.
SECRET_WORD = "Zanzibar-4471"
SECRET = f"my tortoise is called {SECRET_WORD}"
KEPT = "I like jasmine tea"
