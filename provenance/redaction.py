"""Redact part of a message: remove the sentences or clauses that hold what is to be forgotten.

`redact_text` is pure and offline: it splits the message into sentences,
each sentence into clauses (at `,` `;` `and` `but`, token by token), drops
the clauses that hold a matched word, and reassembles what is left with a
capital letter and a final period. "I live in Paris and work as a nurse."
without "I live in Paris" is "I work as a nurse.": a kept clause that lost
its subject with the dropped one gets that subject back.

Everything here is linear in the text: one tokenizing pass with a regular
expression whose alternatives cannot backtrack, then plain list walks.

`redact_with_model` asks the configured OpenAI-compatible model for the same
rewrite; the user approves (and may edit) the exact text either way.
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


def _same_word(a: str, b: str) -> bool:
    if a == b:
        return True
    return len(a) >= _STEM and len(b) >= _STEM and a[:_STEM] == b[:_STEM]


def _matched_exact(tokens: list[_Token], phrase: str) -> set[int]:
    """Indices of the tokens inside an occurrence of `phrase` (by words, case-insensitive)."""
    wanted = [t.word for t in _tokens(phrase)]
    if not wanted:
        return set()
    words = [t.word for t in tokens]
    hits: set[int] = set()
    # At most len(tokens) x len(wanted) comparisons: the phrase is bounded by
    # the request size, the message by DELLM_MAX_MESSAGE_CHARS.
    for i in range(len(words) - len(wanted) + 1):
        if words[i : i + len(wanted)] == wanted:
            hits.update(range(i, i + len(wanted)))
    return hits


def _matched_words(tokens: list[_Token], query: str) -> set[int]:
    """Indices of the tokens that are one of the query's content words (or a form of one)."""
    wanted = {t.word for t in _tokens(query) if t.is_word and t.word not in _STOPWORDS}
    return {i for i, t in enumerate(tokens) if t.is_word and any(_same_word(t.word, w) for w in wanted)}


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


def _render(text: str, tokens: list[_Token], indices: list[int]) -> str:
    """The clause's own text, from its first to its last token (inner spacing kept)."""
    return text[tokens[indices[0]].start : tokens[indices[-1]].end]


def redact_text(*, text: str, exact: str | None = None, semantic: str | None = None) -> str | None:
    """`text` without the clauses that hold the matched words; None if nothing (or everything) would go.

    `exact` matches a phrase word by word; `semantic` matches the content words
    of a query (and their forms: "live" also matches "lives").
    """
    tokens = _tokens(text)
    if exact is not None:
        matched = _matched_exact(tokens, exact)
    elif semantic is not None:
        matched = _matched_words(tokens, semantic)
    else:
        return None
    if not matched:
        return None
    kept_sentences: list[str] = []
    dropped_any = False
    for sentence in _clauses(tokens):
        kept: list[str] = []
        carried_subject: str | None = None
        previous_kept: int | None = None
        carried_prefix = ""
        for number, clause in enumerate(sentence):
            if matched.intersection(clause):
                dropped_any = True
                first = tokens[clause[0]]
                # "I live in Paris and work as a nurse": the next clause shares the subject.
                if not kept and first.word in _SUBJECTS:
                    carried_subject = "I" if first.word == "i" else first.text.lower()
                continue
            if previous_kept == number - 1:
                # Neighbours in the original: keep what joined them (", and", " but").
                kept[-1] = text[tokens[sentence[previous_kept][0]].start : tokens[clause[-1]].end]
                if carried_prefix:
                    kept[-1] = f"{carried_prefix} {kept[-1]}"
            else:
                part = _render(text, tokens, clause)
                carried_prefix = ""
                if carried_subject is not None and not kept and tokens[clause[0]].word not in _SUBJECTS:
                    carried_prefix = carried_subject
                    part = f"{carried_subject} {part}"
                kept.append(part)
            carried_subject = None
            previous_kept = number
        if kept:
            sentence_text = ", ".join(kept)
            sentence_text = sentence_text[0].upper() + sentence_text[1:]
            kept_sentences.append(sentence_text.rstrip(" ,;") + ".")
    if not dropped_any or not kept_sentences:
        return None
    return " ".join(kept_sentences)


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


def redaction_propose(*, text: str, exact: str | None = None, semantic: str | None = None) -> str | None:
    """The redacted text offered in a preview: the configured model's rewrite when one is configured, else rules.

    A model rewrite is only asked for when the rules find the matched words in
    the message (so a message matched by meaning alone is deleted whole), and
    the rules' answer stands if the model fails.
    """
    by_rules = redact_text(text=text, exact=exact, semantic=semantic)
    if by_rules is None or settings.DELLM_LLM != "openai" or not settings.DELLM_REDACT_WITH_MODEL:
        return by_rules
    return redact_with_model(text=text, topic=exact if exact is not None else semantic or "") or by_rules
