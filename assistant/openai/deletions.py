"""A deletion request typed at `/v1` ("forget that I live in Paris"): previewed, answered in words, never stored.

The answer is a sentence a chat client shows as the assistant's reply: what
forgetting would remove, and the link where the user reviews and confirms it
in DeLLM. Neither the request nor the answer is stored, so neither holds a
position in the thread when the client sends its transcript back.
"""

from django.contrib.auth.models import User
from django.http import HttpRequest

from assistant.openai import transcript
from assistant.openai.relay import Prepared
from assistant.openai.wire import CompletionRequest, completion_id
from chat.models import Message
from chat.selectors import TOOL_ANSWER, TOOL_CALL, TOOL_RESULT, tool_step_kinds
from provenance.deletions.forget_phrases import TYPED_REQUEST_MODE, parse_deletion_request, resolve_deletion_request
from provenance.deletions.preview import deletion_preview

# Seq numbers listed by a deletion preview answered in the chat.
PREVIEW_LISTED = 10
# A tool step in words (chat.selectors.tool_step_kinds).
TOOL_STEP_WORDS = {
    TOOL_CALL: "a tool call",
    TOOL_RESULT: "a tool result",
    TOOL_ANSWER: "an answer written after tool results",
}


def without_deletion_requests(conversation: list[transcript.Said]) -> list[transcript.Said]:
    """The transcript less the deletion requests typed earlier and the previews that answered them.

    Neither was ever stored, so neither holds a position in the thread.
    """
    kept: list[transcript.Said] = []
    skip_answer = False
    for said in conversation:
        if said.role == "user" and parse_deletion_request(said.text) is not None:
            skip_answer = True
            continue
        if skip_answer and said.role == "assistant":
            skip_answer = False
            continue
        skip_answer = False
        kept.append(said)
    return kept


def deletion_answer(http: HttpRequest, *, owner: User, text: str, parsed: CompletionRequest) -> Prepared:
    deletion = deletion_preview(
        owner=owner,
        actor=owner,
        mode=TYPED_REQUEST_MODE,
        selector="request",
        # The answer is a sentence and a link to the stored preview, which keeps
        # no redaction text: one made here would be a model call nobody sees.
        offer_redactions=False,
        **resolve_deletion_request(owner=owner, text=text),
    )
    link = http.build_absolute_uri(f"/?deletion={deletion.pk}")
    seqs = dict(
        Message.objects.filter(owner=owner, pk__in=deletion.matched_ids + deletion.dependent_ids).values_list(
            "pk", "seq"
        )
    )

    def listed(ids: list[int]) -> str:
        numbers = sorted(seqs[pk] for pk in ids if pk in seqs)
        shown = ", ".join(f"#{seq}" for seq in numbers[:PREVIEW_LISTED])
        return shown + (f" and {len(numbers) - PREVIEW_LISTED} more" if len(numbers) > PREVIEW_LISTED else "")

    if deletion.total == 0:
        answer = (
            "Nothing in your DeLLM memory matches this request, so nothing would be deleted. "
            "(This request was not stored.)"
        )
    else:
        answer = (
            f"Nothing has been deleted yet. Forgetting this would remove {deletion.total} "
            f"message{'s' if deletion.total != 1 else ''} from your DeLLM memory: "
            f"{listed(deletion.matched_ids)} matched"
            + (
                f", and {listed(deletion.dependent_ids)} derived from {'them' if deletion.matched_count != 1 else 'it'}"
                if deletion.dependent_ids
                else ""
            )
            + "."
            + _tool_steps_sentence(
                tool_step_kinds({*deletion.matched_ids, *deletion.dependent_ids}, owner_ids={owner.pk}), seqs
            )
            + f" Review and confirm (or cancel) in DeLLM: {link}\n\n(This request was not stored.)"
        )
    return Prepared(
        request=parsed,
        owner_id=owner.pk,
        answer=answer,
        answer_id=completion_id(None, deletion.pk),
        dellm={
            "deletion_id": deletion.pk,
            "deletion_url": link,
            "matched": deletion.matched_ids,
            "dependents": deletion.dependent_ids,
            "thread_id": None,
            "turn_id": None,
            "message_id": None,
            "system_message_id": None,
            "reply_id": None,
            "context": [],
            "facts": [],
        },
    )


def _tool_steps_sentence(kinds: dict[int, str], seqs: dict[int, int]) -> str:
    """The sentence naming the tool steps that would go (`kinds`: id -> kind), with a leading space; "" if none.

    A regeneration cannot run the client's tools again, so a tool step is
    deleted even where the user asks to rewrite what was derived
    (provenance/regeneration/replies.py): the answer says so before they choose.
    """
    named = [f"#{seqs[pk]} ({TOOL_STEP_WORDS[kinds[pk]]})" for pk in sorted(kinds, key=seqs.__getitem__)]
    if not named:
        return ""
    if len(named) > PREVIEW_LISTED:
        listed = ", ".join(named[:PREVIEW_LISTED]) + f" and {len(named) - PREVIEW_LISTED} more"
    else:
        listed = " and ".join([", ".join(named[:-1]), named[-1]]) if len(named) > 1 else named[0]
    many = len(named) > 1
    return (
        f" {listed} {'are tool steps' if many else 'is a tool step'}: {'they are' if many else 'it is'} deleted, "
        "never regenerated, even if you choose to rewrite what was derived (DeLLM cannot run your tools again)."
    )
