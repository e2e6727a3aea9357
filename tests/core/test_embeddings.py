import numpy as np

from chat.embeddings import get_embedder


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
