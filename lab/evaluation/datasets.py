"""Evaluation data: scenarios of statements to share and questions to ask.

A scenario is one evaluation owner's life: its statements are sent as chat
turns in order, its questions are asked before and after the forget facts are
deleted. TOFU is one scenario (one owner holding every author's facts); PF
(`personas.py`) is one scenario per persona.
"""

import json
import random
from dataclasses import dataclass
from pathlib import Path

TOFU_FACTS_PER_AUTHOR = 20


@dataclass(frozen=True)
class Statement:
    key: str
    text: str
    # False for PF requests: messages that use facts without stating them.
    fact: bool = True


@dataclass(frozen=True)
class Question:
    key: str
    text: str
    gold: str
    fact_key: str
    forget: bool


@dataclass(frozen=True)
class Scenario:
    key: str
    statements: tuple[Statement, ...]
    questions: tuple[Question, ...]
    forget_keys: tuple[str, ...]
    # (key, text) of forget facts that share their message with other facts
    # (the mixed-facts variant): what to forget is that text, not the whole message.
    forget_parts: tuple[tuple[str, str], ...] = ()

    def text_of(self, key: str) -> str:
        return next(s.text for s in self.statements if s.key == key)

    def forget_text(self, key: str) -> str:
        """The words of forget fact `key`: its own sentence, even inside a message that holds more."""
        return dict(self.forget_parts).get(key) or self.text_of(key)

    def kept_texts(self) -> list[str]:
        """What the user said that forgetting keeps: every statement, less the words of its forget fact."""
        forgotten = {key: self.forget_text(key) for key in self.forget_keys}
        return [s.text.replace(forgotten[s.key], " ") if s.key in forgotten else s.text for s in self.statements]


@dataclass(frozen=True)
class Dataset:
    name: str
    scenarios: tuple[Scenario, ...]

    @property
    def question_count(self) -> int:
        return sum(len(s.questions) for s in self.scenarios)


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def tofu_load(
    *,
    directory: Path,
    forget_per_author: int = TOFU_FACTS_PER_AUTHOR,
    retain_authors: int = 20,
    retain_per_author: int = TOFU_FACTS_PER_AUTHOR,
    retain_questions: int | None = None,
    seed: int = 0,
) -> Dataset:
    """TOFU as the paper uses it: forget01's answers plus `retain_authors` other authors' answers.

    Facts are shared in a seeded shuffle, so forget facts sit among retain facts
    and later replies draw on them. Every forget question is asked; retain
    questions are all asked, or a seeded sample of `retain_questions`.
    """
    full = _read_jsonl(directory / "full.jsonl")
    forget = _read_jsonl(directory / "forget01.jsonl")
    authors = len(full) // TOFU_FACTS_PER_AUTHOR
    forget_authors = len(forget) // TOFU_FACTS_PER_AUTHOR
    if full[-len(forget) :] != forget:
        raise ValueError("forget01.jsonl is not the last rows of full.jsonl; is the TOFU directory intact?")
    if retain_authors > authors - forget_authors:
        raise ValueError(f"TOFU has {authors - forget_authors} retain authors, {retain_authors} asked for.")
    picked = [(author, False, retain_per_author) for author in range(retain_authors)]
    picked += [(author, True, forget_per_author) for author in range(authors - forget_authors, authors)]
    statements, questions = [], []
    for author, is_forget, count in picked:
        for index in range(count):
            row = full[author * TOFU_FACTS_PER_AUTHOR + index]
            key = f"a{author + 1}-{index + 1}"
            statements.append(Statement(key=key, text=row["answer"]))
            questions.append(
                Question(key=key, text=row["question"], gold=row["answer"], fact_key=key, forget=is_forget)
            )
    rng = random.Random(seed)
    rng.shuffle(statements)
    forget_questions = [q for q in questions if q.forget]
    retain = [q for q in questions if not q.forget]
    if retain_questions is not None and retain_questions < len(retain):
        retain = sorted(rng.sample(retain, retain_questions), key=questions.index)
    scenario = Scenario(
        key="tofu",
        statements=tuple(statements),
        questions=tuple(forget_questions + retain),
        forget_keys=tuple(q.fact_key for q in forget_questions),
    )
    return Dataset(name="tofu", scenarios=(scenario,))
