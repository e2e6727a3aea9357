"""The compared systems, each a context policy plus a way to forget, on the real services.

An `EvalOwner` is one throwaway user (`eval-` prefix) with one thread. Every
message goes through `chat.turns.start.turn_create` + `turn_run`; every removal
through `provenance.deletions.preview.deletion_preview` + `deletion_confirm`.
"""

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model

from chat.facts.extract import facts_extract_pass
from chat.models import Message, Turn
from chat.threads import thread_create
from chat.turns.run import turn_run
from chat.turns.start import turn_create
from lab.evaluation.metrics import lexemes
from provenance.deletions.confirm import deletion_confirm
from provenance.deletions.preview import deletion_preview

DEFAULT_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
USERNAME_PREFIX = "eval-"


@dataclass(frozen=True)
class System:
    name: str
    policy: str
    # provenance: purge the fact and Dep(fact), by id (DeLLM).
    # none: nothing to forget with (no memory is ever used).
    # instruction: ask the LLM to forget, in a message; nothing is removed.
    # semantic: purge every message at cosine >= threshold to the fact, Dep not followed.
    forgetting: str
    threshold: float | None = None
    # provenance only: what happens to Dep(fact) \\ fact ("delete" or "regenerate"),
    # and whether the fact's message is redacted (the rest of it kept) when it holds more.
    derived: str = "delete"
    redact: bool = False
    # DeLLM with distilled memory: facts drawn from each statement (chat/facts/), used in contexts.
    facts: bool = False


def system_parse(name: str) -> System:
    if name == "dellm":
        return System(name=name, policy="relevant", forgetting="provenance")
    if name == "dellm_vector":
        # DeLLM with similarity-only contexts (before fusion), for comparison.
        return System(name=name, policy="vector", forgetting="provenance")
    if name == "dellm:facts":
        return System(name=name, policy="relevant", forgetting="provenance", facts=True)
    if name == "dellm:regenerate":
        return System(name=name, policy="relevant", forgetting="provenance", derived="regenerate")
    if name == "dellm:redact":
        return System(name=name, policy="relevant", forgetting="provenance", derived="regenerate", redact=True)
    if name == "no_memory":
        return System(name=name, policy="none", forgetting="none")
    if name == "full_memory":
        return System(name=name, policy="full", forgetting="instruction")
    if name.startswith("semantic:"):
        try:
            threshold = float(name.removeprefix("semantic:"))
        except ValueError:
            raise ValueError(f"Bad threshold in system {name!r}.") from None
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"The threshold of {name!r} must be in (0, 1].")
        return System(name=f"semantic:{threshold:g}", policy="full", forgetting="semantic", threshold=threshold)
    raise ValueError(
        f"Unknown system {name!r}: use dellm, dellm_vector, dellm:facts, dellm:regenerate, dellm:redact, no_memory, "
        "full_memory or semantic:<threshold>."
    )


def systems_default(thresholds=DEFAULT_THRESHOLDS) -> list[System]:
    names = [
        "dellm",
        "dellm:facts",
        "dellm:regenerate",
        "dellm:redact",
        "no_memory",
        "full_memory",
        *(f"semantic:{t:g}" for t in thresholds),
    ]
    return [system_parse(name) for name in names]


def run_id_new() -> str:
    return secrets.token_hex(4)


class EvalOwner:
    """One system's throwaway user for one scenario; `close()` deletes it and all its data."""

    def __init__(self, *, system: System, run_id: str, scenario_key: str):
        slug = system.name.replace(":", "").replace(".", "")
        self.user = get_user_model().objects.create_user(username=f"{USERNAME_PREFIX}{run_id}-{slug}-{scenario_key}")
        self.thread = thread_create(owner=self.user, title="evaluation")
        self.system = system
        # Model calls spent on forgetting: rewritten replies, or the "forget this" message.
        self.forget_calls = 0

    def say(self, text: str) -> tuple[int, str]:
        """One chat turn; returns the stored user message's id and the reply."""
        turn = turn_create(thread=self.thread, content=text, policy=self.system.policy, enqueue=False)
        turn = turn_run(turn_id=turn.pk, owner_id=turn.owner_id)
        if turn.reply is None:
            raise RuntimeError(f"Evaluation turn {turn.pk} ended {turn.status}: {turn.error}")
        if self.system.facts:
            # What the worker does after a reply (chat.facts_extract), in-process here.
            facts_extract_pass(owner_id=self.user.pk)
        return turn.user_message_id, turn.reply.content

    def ask(self, text: str) -> str:
        """A probe: the reply to a question, leaving no trace in later contexts.

        The question and its reply are soft-deleted right away, so probes never
        answer later probes (TOFU answers restate their questions).
        """
        message_id, reply = self.say(text)
        self._remove(mode="soft", ids=[message_id])
        return reply

    def live_ids(self) -> set[int]:
        return set(Message.objects.filter(owner=self.user, status__in=Message.LIVE).values_list("pk", flat=True))

    def fact_ids(self) -> set[int]:
        return set(
            Message.objects.filter(owner=self.user, status__in=Message.LIVE, role=Message.Role.FACT).values_list(
                "pk", flat=True
            )
        )

    def copies(self, text: str, kept: set[str]) -> int:
        """Live messages holding a lexeme only the forgotten `text` had (`kept`: the lexemes of what the user
        said that forgetting keeps): a copy the deletion missed, quoted or told back in other words (the
        offline responder acknowledges "you live in Lisbon", not the statement itself)."""
        only = lexemes([text])[0] - kept
        if not only:
            return 0
        live = Message.objects.filter(owner=self.user, status__in=Message.LIVE).values_list("content", flat=True)
        return sum(bool(words & only) for words in lexemes(list(live)))

    def forget(self, *, message_id: int, text: str) -> None:
        """Forget one fact the way this system does."""
        kind = self.system.forgetting
        if kind == "provenance" and self.system.redact:
            # The fact's own words select (its message and the replies quoting it);
            # every redaction on offer is approved as proposed.
            deletion = deletion_preview(
                owner=self.user, actor=self.user, mode="purge", exact=text, derived=self.system.derived
            )
            redactions = {str(p["message"]): p["text"] for p in deletion.redaction_proposals}
            self._confirm(deletion, redactions=redactions)
        elif kind == "provenance":
            self._remove(mode="purge", ids=[message_id], derived=self.system.derived)
        elif kind == "instruction":
            self.say(f"Forget this: {text}")
            self.forget_calls += 1
        elif kind == "semantic":
            # depth=0: the semantic match only, none of what was derived from it.
            self._remove(mode="purge", semantic=text, threshold=self.system.threshold, depth=0)

    def _remove(self, *, mode: str, **select) -> None:
        deletion = deletion_preview(owner=self.user, actor=self.user, mode=mode, **select)
        self._confirm(deletion)

    def _confirm(self, deletion, redactions: dict[str, str] | None = None) -> None:
        # Celery runs eagerly in the evaluation: the rewrites are done on return.
        deletion_confirm(
            deletion_id=deletion.pk, owner_id=self.user.pk, confirmed_by=self.user, redactions=redactions or None
        )
        self.forget_calls += Turn.objects.filter(deletion_id=deletion.pk).count()

    def close(self) -> None:
        self.user.delete()
