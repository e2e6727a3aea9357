from django.core.management import call_command
from django.db import connection

from chat.index import embeddings
from chat.index.embeddings import get_embedder
from chat.models import Message
from chat.retrieval.context import context_retrieve
from tests.factories import make_message, unit_vector


def test_reembed_fills_vectors_for_messages_with_content(owner, thread):
    live = make_message(thread, "I live in Paris")
    deleted = make_message(thread, "I like tea", status="deleted")
    purged = make_message(thread, "", status="purged")
    # Never embedded: a system prompt is not memory, so nothing may find it by meaning.
    prompt = make_message(thread, "Answer in French.", role="system")
    call_command("reembed")
    rows = {m.pk: m for m in Message.objects.filter(owner=owner)}
    assert len(rows[live.pk].embedding) == 256
    assert len(rows[deleted.pk].embedding) == 256
    assert rows[purged.pk].embedding is None
    assert rows[prompt.pk].embedding is None
    assert rows[live.pk].embedding_model == "wordllama-l2_supercat-256"


def test_reembed_leaves_a_message_purged_during_its_batch_without_embedding(owner, thread, monkeypatch):
    first = make_message(thread, "I live in Paris")
    second = make_message(thread, "My dog is called Rex")
    embedder = get_embedder()
    embed = embedder.embed

    def embed_while_a_purge_lands(texts: list[str]) -> list:
        Message.objects.filter(pk=second.pk).update(status="purged", content="", embedding=None)
        return embed(texts)

    monkeypatch.setattr(embedder, "embed", embed_while_a_purge_lands)
    call_command("reembed", "--no-progress")
    rows = {m.pk: m for m in Message.objects.filter(owner=owner)}
    assert len(rows[first.pk].embedding) == 256
    assert (rows[second.pk].embedding, rows[second.pk].embedding_model) == (None, "")


def test_similarity_compares_only_vectors_of_the_questions_model(owner, thread):
    # Mid-switch: one message still has the old model's vector (same direction
    # here, to show it is the model, not the distance, that keeps it out).
    old = make_message(thread, "I live in Paris", embedding=unit_vector(1), embedding_model="old-model")
    new = make_message(thread, "I live in Lyon", embedding=unit_vector(1), embedding_model="new-model")
    question = make_message(thread, "?", embedding=unit_vector(1), embedding_model="new-model")
    for policy in ("vector", "relevant"):
        context = context_retrieve(message=question, policy=policy, k=5, threshold=0.2, window=0)
        assert [item.id for item in context] == [new.pk]
    assert Message.objects.get(pk=old.pk).embedding is not None


def _ids(items: list) -> list[tuple[int, str]]:
    return sorted((item.id, item.signal) for item in items)


def test_reembed_switches_a_live_installation_to_an_embedder_of_another_dimension(
    owner, thread, openai_server, settings
):
    """WordLlama (256-d) -> an OpenAI-compatible model of 768 dimensions (the fake server), one database."""
    wordllama = get_embedder()

    def old(text: str) -> Message:
        return make_message(thread, text, embedding=wordllama.embed([text])[0], embedding_model=wordllama.model_name)

    rex, slippers, sleeps, nurse = (
        old(text)
        for text in ("My dog Rex chewed the sofa.", "Rex ate my slippers.", "Rex sleeps a lot.", "I am a nurse.")
    )
    old_question = old("What did Rex do?")
    before = context_retrieve(message=old_question, policy="vector", k=10, threshold=-1, window=0)
    assert _ids(before) == [(m.pk, "vector") for m in (rex, slippers, sleeps, nurse)]

    settings.DELLM_EMBEDDER, settings.DELLM_EMBEDDING_MODEL, settings.DELLM_EMBEDDING_DIM = (
        "openai",
        "fake-embed-768d",
        0,
    )
    embeddings._loaded.cache_clear()
    try:
        embedder = get_embedder()
        assert embedder.dim == 768
        question = make_message(
            thread,
            "What did Rex do?",
            embedding=embedder.embed(["What did Rex do?"])[0],
            embedding_model="fake-embed-768d",
        )
        during: dict[str, list] = {}
        embed = embedder.embed

        def embed_then_look(texts: list[str]) -> list:
            # The second batch: rex and slippers are re-embedded, sleeps and nurse not yet (each batch's
            # texts are its messages' own words, then their previous turns': chat/writer/vectors.py).
            if len(during) == 0 and texts[:2] == [sleeps.content, nurse.content]:
                during["new"] = context_retrieve(message=question, policy="vector", k=10, threshold=-1, window=0)
                during["fused"] = context_retrieve(message=question, policy="relevant", k=10, threshold=-1, window=0)
                during["old"] = context_retrieve(message=old_question, policy="vector", k=10, threshold=-1, window=0)
                during["window"] = context_retrieve(message=question, policy="window", k=10, threshold=-1, window=10)
            return embed(texts)

        embedder.embed = embed_then_look  # type: ignore[method-assign]
        call_command("reembed", "--batch", "2", "--only-stale", "--no-progress")

        # During: a new-model question sees by vector only what is re-embedded,
        # by words everything; an old-model question only old vectors.
        assert _ids(during["new"]) == [(rex.pk, "vector"), (slippers.pk, "vector")]
        assert _ids(during["fused"]) == [
            (rex.pk, "both"),
            (slippers.pk, "both"),
            (sleeps.pk, "lexical"),
            (old_question.pk, "lexical"),
        ]
        assert _ids(during["old"]) == [(sleeps.pk, "vector"), (nurse.pk, "vector")]
        # Position-based context: other models' messages score 0 (never compared).
        scores = {item.id: item.score for item in during["window"]}
        assert [scores[m.pk] == 0 for m in (rex, slippers, sleeps, nurse)] == [False, False, True, True]

        after = context_retrieve(message=question, policy="vector", k=10, threshold=-1, window=0)
        assert _ids(after) == [(m.pk, "vector") for m in (rex, slippers, sleeps, nurse, old_question)]
        with connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT embedding_model, vector_dims(embedding) FROM chat_message")
            assert cursor.fetchall() == [("fake-embed-768d", 768)]
    finally:
        embeddings._loaded.cache_clear()
