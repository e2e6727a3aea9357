from django.core.management import call_command

from chat.embeddings import get_embedder
from chat.models import Message
from chat.selectors import context_retrieve
from tests.factories import make_message, unit_vector


def test_reembed_fills_vectors_for_messages_with_content(owner, thread):
    live = make_message(thread, "I live in Paris")
    deleted = make_message(thread, "I like tea", status="deleted")
    purged = make_message(thread, "", status="purged")
    call_command("reembed")
    rows = {m.pk: m for m in Message.objects.filter(owner=owner)}
    assert len(rows[live.pk].embedding) == 256
    assert len(rows[deleted.pk].embedding) == 256
    assert rows[purged.pk].embedding is None
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


def test_reembed_switches_embedders_while_retrieval_keeps_working(owner, thread, openai_server, settings):
    """WordLlama -> an OpenAI-compatible model (the fake server, 256-d) on a live history."""
    wordllama = get_embedder()
    fact = make_message(
        thread,
        "My dog Rex chewed the sofa.",
        embedding=wordllama.embed(["My dog Rex chewed the sofa."])[0],
        embedding_model=wordllama.model_name,
    )
    openai_server.embedding_dim = 256
    settings.DELLM_EMBEDDER, settings.DELLM_EMBEDDING_MODEL = "openai", "fake-embedding"
    get_embedder.cache_clear()
    try:
        question = make_message(thread, "What did Rex do?", embedding=get_embedder().embed(["What did Rex do?"])[0])
        Message.objects.filter(pk=question.pk).update(embedding_model="fake-embedding")
        question.refresh_from_db()
        # Mid-switch: the fact has only an old-model vector. Similarity leaves
        # it out (never compared with the new model's), words still find it.
        assert context_retrieve(message=question, policy="vector", k=5, threshold=-1, window=0) == []
        mid = context_retrieve(message=question, policy="relevant", k=5, threshold=-1, window=0)
        assert [(item.id, item.signal) for item in mid] == [(fact.pk, "lexical")]
        call_command("reembed", "--batch", "1", "--only-stale", "--no-progress")
        after = context_retrieve(message=question, policy="relevant", k=5, threshold=-1, window=0)
        assert [(item.id, item.signal) for item in after] == [(fact.pk, "both")]
        assert set(Message.objects.filter(owner=owner).values_list("embedding_model", flat=True)) == {"fake-embedding"}
    finally:
        get_embedder.cache_clear()
