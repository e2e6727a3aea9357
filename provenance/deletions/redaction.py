"""Redact part of a message: remove the sentences or clauses that hold what is to be forgotten.

`redact_text` is pure and offline: it splits the message into sentences,
each sentence into clauses (at `,` `;` `and` `but`, token by token), drops
the clauses that hold a matched word, and reassembles what is left with a
capital letter and a final period. "I live in Paris and work as a nurse."
without "I live in Paris" is "I work as a nurse.": a kept clause that lost
its subject with the dropped one gets that subject back.

Everything here is linear in len(text) + len(query): one tokenizing pass with
a regular expression whose alternatives cannot backtrack, a `Matcher` built
once from the query (a set of words and of their stems, or the phrase's
Knuth-Morris-Pratt table), then plain list walks in which each step looks at
one token. A preview builds its `Matcher` once for all the messages it scans.
(The matching this replaces compared every token with every query word: a
20,000-character query against one 20,000-character message took 4 s.)
`tests/provenance/deletions/test_redaction_linear.py` counts the steps on adversarial
input.

`redact_with_model` asks the configured OpenAI-compatible model for the same
rewrite; the user approves (and may edit) the exact text either way. The
preview (provenance/deletions/preview.py) decides which messages get one, within the
user's chat budget.
"""

import logging
import re
from dataclasses import dataclass

from django.conf import settings

logger = logging.getLogger(__name__)

# Words, then any one other visible character. Each alternative consumes a
# fixed class, so matching is linear (no nested quantifiers).
_TOKEN = re.compile(r"[\w'’-]+|[^\w\s]")
_SENTENCE_END = {".", "!", "?"}
_CLAUSE_PUNCT = {",", ";"}
_CLAUSE_WORDS = {"and", "but"}
_SUBJECTS = {"i", "we", "you", "he", "she", "they"}
# Words that say nothing about what to forget ("that I live in Paris": "live", "paris").
_STOPWORDS = {
    "a", "an", "the", "i", "i'm", "im", "me", "my", "mine", "we", "our", "you", "your", "he", "she", "it", "its",
    "they", "their", "them", "is", "am", "are", "was", "were", "be", "been", "being", "have", "has", "had", "do",
    "does", "did", "to", "of", "in", "on", "at", "for", "from", "with", "by", "as", "and", "or", "but", "that",
    "this", "these", "those", "about", "so", "not", "no", "also", "just", "very", "there", "here", "what", "which",
    "who", "when", "where", "how", "all", "any", "some", "everything", "anything", "thing", "things", "stuff",
}  # fmt: skip
# Prefix matching of word forms ("live" ~ "lives", "living"): both share this many first letters.
_STEM = 4


@dataclass(frozen=True)
class _Token:
    text: str
    start: int
    end: int

    @property
    def word(self) -> str:
        return self.text.lower().replace("’", "'")

    @property
    def is_word(self) -> bool:
        return self.text[0].isalnum() or self.text[0] == "_"


def _tokens(text: str) -> list[_Token]:
    return [_Token(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _failure(pattern: list[int]) -> list[int]:
    """Knuth-Morris-Pratt: failure[k] is the longest proper border of pattern[: k + 1]."""
    failure = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = failure[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        failure[i] = k
    return failure


class Matcher:
    """Which tokens of a message hold what a selection asks to forget; built once per query.

    `exact` matches a phrase word by word (case-insensitive, every occurrence,
    overlapping ones too); `semantic` matches the content words of a query and
    their forms ("live" also matches "lives": the same first `_STEM` letters).
    """

    def __init__(self, *, exact: str | None = None, semantic: str | None = None) -> None:
        self._exact = exact is not None
        self._phrase: list[int] = []
        self._vocabulary: dict[str, int] = {}
        self._words: set[str] = set()
        self._stems: set[str] = set()
        if exact is not None:
            wanted = [t.word for t in _tokens(exact)]
            # Words become small integers, so each comparison of the scan is O(1).
            self._vocabulary = {word: number for number, word in enumerate(dict.fromkeys(wanted))}
            self._phrase = [self._vocabulary[word] for word in wanted]
            self._failure = _failure(self._phrase)
        elif semantic is not None:
            self._words = {t.word for t in _tokens(semantic) if t.is_word and t.word not in _STOPWORDS}
            self._stems = {word[:_STEM] for word in self._words if len(word) >= _STEM}

    def matched(self, tokens: list[_Token]) -> set[int]:
        """Indices of the matched tokens, in one pass over `tokens`."""
        if self._exact:
            return self._matched_phrase(tokens) if self._phrase else set()
        hits = set()
        for i, token in enumerate(tokens):
            if not token.is_word:
                continue
            word = token.word
            # `word` equals a query word, or shares its stem with one: the stem
            # set holds every query word's, so one lookup replaces a scan of them.
            if word in self._words or (len(word) >= _STEM and word[:_STEM] in self._stems):
                hits.add(i)
        return hits

    def _matched_phrase(self, tokens: list[_Token]) -> set[int]:
        phrase, failure, length = self._phrase, self._failure, len(self._phrase)
        hits: set[int] = set()
        marked = 0  # tokens before this index are already in `hits`
        k = 0
        for i, token in enumerate(tokens):
            word = self._vocabulary.get(token.word, -1)
            # Each step back shortens the match that earlier steps lengthened:
            # at most len(tokens) of them in all.
            while k and phrase[k] != word:
                k = failure[k - 1]
            if phrase[k] == word:
                k += 1
            if k == length:
                # Overlapping occurrences mark only the tokens not yet marked.
                hits.update(range(max(marked, i + 1 - length), i + 1))
                marked = i + 1
                k = failure[k - 1]
        return hits

    def redact(self, text: str) -> str | None:
        """`text` without the clauses that hold the matched words; None if nothing (or everything) would go."""
        tokens = _tokens(text)
        matched = self.matched(tokens)
        if not matched:
            return None
        return _reassembled(text, tokens, matched)


def _clauses(tokens: list[_Token]) -> list[list[list[int]]]:
    """Sentences, each a list of clauses, each a list of token indices (separators belong to no clause)."""
    sentences: list[list[list[int]]] = []
    clauses: list[list[int]] = []
    clause: list[int] = []
    for i, token in enumerate(tokens):
        if token.text in _SENTENCE_END:
            clauses.append(clause)
            sentences.append(clauses)
            clauses, clause = [], []
        elif token.text in _CLAUSE_PUNCT or token.word in _CLAUSE_WORDS:
            clauses.append(clause)
            clause = []
        else:
            clause.append(i)
    clauses.append(clause)
    sentences.append(clauses)
    return [[c for c in s if c] for s in sentences if any(s)]


def _reassembled(text: str, tokens: list[_Token], matched: set[int]) -> str | None:
    """The sentences without their matched clauses, or None if nothing (or everything) went."""
    kept_sentences: list[str] = []
    dropped_any = False
    for sentence in _clauses(tokens):
        # Runs of neighbouring kept clauses, as [first token, last token]: a run
        # is kept with what joined it in the original (", and", " but").
        runs: list[list[int]] = []
        carried_subject: str | None = None
        previous_kept: int | None = None
        for number, clause in enumerate(sentence):
            if any(i in matched for i in clause):
                dropped_any = True
                first = tokens[clause[0]]
                # "I live in Paris and work as a nurse": the next clause shares the subject.
                if not runs and first.word in _SUBJECTS:
                    carried_subject = "I" if first.word == "i" else first.text.lower()
                continue
            if previous_kept == number - 1:
                runs[-1][1] = clause[-1]
            else:
                runs.append([clause[0], clause[-1]])
            previous_kept = number
        if not runs:
            continue
        parts = [text[tokens[first].start : tokens[last].end] for first, last in runs]
        if carried_subject is not None and tokens[runs[0][0]].word not in _SUBJECTS:
            parts[0] = f"{carried_subject} {parts[0]}"
        sentence_text = ", ".join(parts)
        sentence_text = sentence_text[0].upper() + sentence_text[1:]
        kept_sentences.append(sentence_text.rstrip(" ,;") + ".")
    if not dropped_any or not kept_sentences:
        return None
    return " ".join(kept_sentences)


def redact_text(*, text: str, exact: str | None = None, semantic: str | None = None) -> str | None:
    """`text` without the clauses that hold the matched words; None if nothing (or everything) would go.

    `exact` matches a phrase word by word; `semantic` matches the content words
    of a query (and their forms: "live" also matches "lives"). A caller with
    many texts for one query builds the `Matcher` once instead.
    """
    return Matcher(exact=exact, semantic=semantic).redact(text)


REWRITE_PROMPT = (
    "Rewrite the user's message so that it no longer says anything about: {topic}\n"
    "Keep every other fact and the user's own wording. Answer with the rewritten message only, "
    "or with an empty answer if nothing would remain.\n\nMessage:\n{text}"
)


def redact_with_model(*, text: str, topic: str) -> str | None:
    """The configured model's rewrite of `text` without `topic`; None on any failure or an empty answer."""
    import openai

    from chat.llm import SYSTEM_PROMPT, openai_client

    try:
        response = openai_client().chat.completions.create(
            model=settings.DELLM_CHAT_MODEL,
            messages=[
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": REWRITE_PROMPT.format(topic=topic, text=text)},
            ],
        )
    except openai.OpenAIError as exc:
        logger.warning("redaction rewrite failed: %s", type(exc).__name__)
        return None
    answer = (response.choices[0].message.content or "").strip() if response.choices else ""
    return answer or None


def redaction_uses_model() -> bool:
    """Whether a preview asks the configured model for its redactions (else the rules' text is offered)."""
    return settings.DELLM_LLM == "openai" and settings.DELLM_REDACT_WITH_MODEL
