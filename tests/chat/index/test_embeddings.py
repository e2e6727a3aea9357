import subprocess
import sys
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from chat.index import embeddings
from chat.index.embeddings import OpenAIEmbedder, get_embedder
from chat.selectors import embedding_model_latest
from core.errors import UpstreamFailed
from tests.factories import make_message, make_thread, unit_vector
from tests.fake_openai import _embeddings
from tests.helpers import ROOT


def test_wordllama_loads_from_the_wheel_and_embeds_unit_vectors():
    embedder = get_embedder()
    vectors = np.array(embedder.embed(["I live in Paris", "Where do I live?", "My cat is called Miso"]))
    assert vectors.shape == (3, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]


def test_wordllama_is_deterministic():
    embedder = get_embedder()
    assert embedder.embed(["same text"]) == embedder.embed(["same text"])


def test_wordllama_gives_no_vector_for_empty_text():
    assert get_embedder().embed(["", "words"])[0] is None


def _tofu_text(words: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    vocabulary = (ROOT / "lab" / "evaluation" / "data" / "tofu" / "full.jsonl").read_text()[:200_000].split()
    return " ".join(rng.choice(vocabulary, size=words))


def _wordllama():
    """WordLlama's own model, as the embedder loads it (it keeps only the table and the tokenizer)."""
    from wordllama import WordLlama

    return WordLlama.load(dim=256, cache_dir=Path(settings.DELLM_DATA_DIR) / "wordllama", disable_download=True)


def test_wordllama_vectors_are_its_own_bit_for_bit_in_any_batch(monkeypatch):
    """Pooled here a text at a time (and a long one TOKENS_AT_ONCE tokens at a time), not by WordLlama's
    padded batches: the same float32 sums in the same order, so the same vectors."""
    monkeypatch.setattr(embeddings, "TOKENS_AT_ONCE", 100)
    monkeypatch.setattr(embeddings, "TOKENIZE_BYTES", 5_000)
    embedder = get_embedder()
    texts = [_tofu_text(words, seed) for seed, words in enumerate([1, 5, 40, 99, 100, 101, 350, 2_000, 7])] + [
        "",
        "\x00\x01",
        "héllo wörld, ’quoted’, 日本語 🎉🎉",
        "a " * 3_000,
    ]
    mine = embedder._pooled(texts)
    theirs = _wordllama().embed(texts, norm=False)
    assert mine.dtype == theirs.dtype == np.float32
    assert mine.tobytes() == theirs.tobytes()
    assert [embedder._pooled([text]).tobytes() for text in texts] == [row.tobytes() for row in theirs]


def test_wordllama_embeds_long_texts_in_bounded_memory():
    """Messages of 100,000 characters, the import's limit (about 25,000 tokens each): WordLlama's own
    `embed` pads a batch of 64 to its longest and gathers texts x tokens x 256 float32, twice. These 8
    traced 427 MB through it (and took a process from 175 to 607 MB of RSS); a batch of 64, eight
    times that. Pooled a text and TOKENS_AT_ONCE tokens at a time: 8.5 MB."""
    embedder = get_embedder()
    texts = [_tofu_text(16_000, seed)[:100_000] for seed in range(8)]
    assert {len(text) for text in texts} == {100_000}
    tracemalloc.start()
    try:
        vectors = embedder.embed(texts)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len([v for v in vectors if v is not None]) == 8
    assert peak < 16_000_000


def test_openai_embedder_returns_vectors_in_input_order(openai_server):
    vectors = OpenAIEmbedder(model="text-embedding-3-small", dim=8).embed(["a", "bbb"])
    assert vectors == [item["embedding"] for item in _embeddings(["a", "bbb"], 8)["data"][::-1]]
    body = openai_server.requests[0]["body"]
    assert (openai_server.requests[0]["path"], body["model"], body["input"]) == (
        "/v1/embeddings",
        "text-embedding-3-small",
        ["a", "bbb"],
    )


def test_openai_embedder_refuses_a_dimension_other_than_the_configured_one(openai_server):
    with pytest.raises(UpstreamFailed, match=r"returned 8-d vectors, not the 1536-d configured"):
        OpenAIEmbedder(model="text-embedding-3-small", dim=1536).embed(["a"])


def test_openai_embedder_probes_its_dimension_once_when_none_is_configured(openai_server):
    embedder = OpenAIEmbedder(model="fake-embed-768d")
    assert (embedder.dim, embedder.dim) == (768, 768)
    assert [request["body"]["input"] for request in openai_server.requests] == [["dimension probe"]]
    assert len(embedder.embed(["a"])[0]) == 768


def test_openai_embedder_marks_rate_limits_transient(openai_server):
    openai_server.script = [("status", 429)]
    with pytest.raises(UpstreamFailed) as error:
        OpenAIEmbedder(model="text-embedding-3-small", dim=8).embed(["a"])
    assert error.value.transient


def test_the_latest_embedding_model_is_the_owners_newest_vectors(owner, thread, other_owner):
    assert embedding_model_latest(owner_id=owner.pk) == ""
    make_message(thread, "old words", embedding=unit_vector(1), embedding_model="old-model")
    make_message(thread, "new words", embedding=unit_vector(2), embedding_model="new-model")
    # Newer, but no vector: a tool step, a system prompt, a purged tombstone.
    make_message(thread, "", role="assistant", tool_calls=[{"id": "c1", "name": "f", "arguments": "{}"}])
    make_message(make_thread(other_owner), "theirs", embedding=unit_vector(3), embedding_model="their-model")

    assert embedding_model_latest(owner_id=owner.pk) == "new-model"


def test_concurrent_first_calls_load_the_embedder_once(monkeypatch):
    loads = []
    start = threading.Barrier(8)

    class SlowLoad:
        local = True

        def __init__(self, **kwargs):
            loads.append(kwargs)
            time.sleep(0.2)  # a load that takes a while: the others arrive meanwhile

    monkeypatch.setattr(embeddings, "WordLlamaEmbedder", SlowLoad)
    embeddings._loaded.cache_clear()
    try:

        def first_call():
            start.wait()
            return embeddings.get_embedder()

        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda _: first_call(), range(8)))
        assert (len(loads), len({id(embedder) for embedder in got})) == (1, 1)
    finally:
        embeddings._loaded.cache_clear()


def test_the_web_process_loads_the_embedder_before_its_first_request():
    probe = "import dellm_site.asgi\nfrom chat.index import embeddings\nprint(embeddings._loaded.cache_info().currsize)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip().splitlines()[-1:]) == (0, ["1"]), done.stderr[-2000:]
