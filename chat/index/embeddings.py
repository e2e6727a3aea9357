"""Embedders: text -> unit vectors, of the embedder's own dimension.

`offline` (default) is WordLlama, whose 256-d weights ship inside the wheel, so
nothing is downloaded. `openai` calls any OpenAI-compatible embeddings endpoint
(OpenAI, Ollama, vLLM...); its dimension is `DELLM_EMBEDDING_DIM`, or, when
that is 0, probed once per process by embedding a fixed string. The database
column has no dimension: each message records its `embedding_model`, and
vectors are only ever compared with vectors of the same model.
"""

import functools
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings

from core.errors import UpstreamFailed


class Embedder(Protocol):
    model_name: str
    # True when it embeds in this process: no text leaves it.
    local: bool

    @property
    def dim(self) -> int:
        """The length of its vectors."""
        ...

    def embed(self, texts: list[str]) -> Sequence[list[float] | None]:
        """Unit vectors; None for a text with nothing to embed (it matches nothing)."""
        ...


# WordLlama's own `embed` pads each batch of 64 texts to its longest, with no
# truncation, and gathers a texts x tokens x 256 float32 array (twice: the
# masked copy): 8 messages of 100,000 characters (25,000 tokens each, the
# import allows such) took a process from 175 to 607 MB, so a batch of 64
# about 3.5 GB (tests/chat/index/test_embeddings.py). Here each text is pooled on its own,
# at most TOKENS_AT_ONCE tokens gathered at a time, and texts are tokenized
# in groups of at most TOKENIZE_BYTES (a token is at least one byte of
# UTF-8), so memory is bounded whatever the texts; the vectors are WordLlama's
# bit for bit (the same float32 sums, in the same order).
TOKENS_AT_ONCE = 4096
TOKENIZE_BYTES = 256 * 1024


def _groups(texts: list[str]) -> Iterator[tuple[int, list[str]]]:
    """Consecutive texts of at most TOKENIZE_BYTES of UTF-8 together (one text alone if longer), with their start."""
    start, size = 0, 0
    for index, text in enumerate(texts):
        length = len(text.encode())
        if index > start and size + length > TOKENIZE_BYTES:
            yield start, texts[start:index]
            start, size = index, 0
        size += length
    if start < len(texts):
        yield start, texts[start:]


class WordLlamaEmbedder:
    def __init__(self, *, cache_dir: Path):
        import wordllama
        from tokenizers import Tokenizer
        from wordllama import WordLlama

        # The wheel ships its tokenizer under wordllama/tokenizers/, but the
        # loader looks in wordllama/tokenizer/ and then in cache_dir/tokenizers/;
        # give it a cache dir holding a copy so it never tries to download.
        tokenizers = cache_dir / "tokenizers"
        tokenizers.mkdir(parents=True, exist_ok=True)
        for config in (Path(wordllama.__file__).parent / "tokenizers").glob("*.json"):
            if not (tokenizers / config.name).exists():
                shutil.copyfile(config, tokenizers / config.name)
        model = WordLlama.load(dim=256, cache_dir=cache_dir, disable_download=True)
        self.model_name = "wordllama-l2_supercat-256"
        self.local = True
        self.dim = 256
        # Only its table and tokenizer are kept (`_pooled` does WordLlama's
        # pooling): a copy of the tokenizer beside the model's cost 39 MB in
        # every process that embeds. Its own `embed` would pad; `_pooled` pads nothing.
        self._table = model.embedding
        self._tokenizer: Tokenizer = model.tokenizer
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()

    def _pooled(self, texts: list[str]) -> np.ndarray:
        """WordLlama's mean of each text's token vectors (`embed(texts, norm=False)`), in bounded memory."""
        table = self._table
        pooled = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for start, group in _groups(texts):
            for offset, encoding in enumerate(self._tokenizer.encode_batch(group, add_special_tokens=False)):
                ids = np.asarray(encoding.ids, dtype=np.int32)
                np.clip(ids, 0, table.shape[0] - 1, out=ids)
                total = pooled[start + offset]
                for at in range(0, len(ids), TOKENS_AT_ONCE):
                    # Summed on from the running total, row by row as WordLlama's one sum over the tokens.
                    total = np.sum(np.vstack([total, table[ids[at : at + TOKENS_AT_ONCE]]]), axis=0, dtype=np.float32)
                pooled[start + offset] = total / np.float32(max(len(ids), 1))
        return pooled

    def embed(self, texts: list[str]) -> list[list[float] | None]:
        vectors = np.asarray(self._pooled(list(texts)), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1)
        # A text without known tokens embeds to zero; its cosine similarity
        # would be NaN, which PostgreSQL sorts above every threshold.
        return [(v / n).astype(np.float32).tolist() if n > 0 else None for v, n in zip(vectors, norms, strict=True)]


# Embedded once to learn an OpenAI-compatible model's dimension.
DIMENSION_PROBE = "dimension probe"


class OpenAIEmbedder:
    def __init__(self, *, model: str, dim: int = 0):
        from chat.llm import openai_client

        self._client = openai_client()
        self.model_name = model
        self.local = False
        # 0: not configured; the first call (or `dim`) learns it from the model.
        self._dim = dim

    @property
    def dim(self) -> int:
        if not self._dim:
            self.embed([DIMENSION_PROBE])
        return self._dim

    def embed(self, texts: list[str]) -> list[list[float]]:
        import openai

        try:
            response = self._client.embeddings.create(model=self.model_name, input=list(texts))
        except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError) as exc:
            raise UpstreamFailed("The embedding service is not answering; retrying.", transient=True) from exc
        except openai.APIStatusError as exc:
            raise UpstreamFailed(
                f"The embedding service answered HTTP {exc.status_code}.", transient=exc.status_code >= 500
            ) from exc
        vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        if vectors and not self._dim:
            self._dim = len(vectors[0])
        if any(len(vector) != self._dim for vector in vectors):
            raise UpstreamFailed(
                f"The embedding model returned {len(vectors[0])}-d vectors, not the {self._dim}-d configured "
                "(DELLM_EMBEDDING_DIM)."
            )
        return vectors


@functools.cache
def _loaded() -> Embedder:
    if settings.DELLM_EMBEDDER == "openai":
        return OpenAIEmbedder(model=settings.DELLM_EMBEDDING_MODEL, dim=settings.DELLM_EMBEDDING_DIM)
    return WordLlamaEmbedder(cache_dir=Path(settings.DELLM_DATA_DIR) / "wordllama")


# `functools.cache` does not make the first call single: requests arriving together
# each loaded WordLlama, and its tokenizer's load raised in some of them.
_LOADING = threading.Lock()


def get_embedder() -> Embedder:
    """The configured embedder, loaded once per process: the first caller loads it, the others wait for it."""
    with _LOADING:
        return _loaded()


def embedder_preload() -> None:
    """Load an in-process embedder now (a web or worker process starting), so no request waits for it."""
    if settings.DELLM_EMBEDDER != "openai":
        get_embedder()


def embed_one(text: str) -> list[float] | None:
    return get_embedder().embed([text])[0]
