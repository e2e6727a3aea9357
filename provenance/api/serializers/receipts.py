"""Serializers of a deletion's receipt and its checks."""

from rest_framework import serializers


class TaintCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    violations = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="[live message id, removed parent id] pairs: invariant I1 broken.",
    )


class GoneCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    checked = serializers.IntegerField(help_text="Matched and deleted ids checked.")
    live = serializers.ListField(child=serializers.IntegerField(), help_text="Of those, the ones still live.")


class ForgetCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    probes = serializers.IntegerField(help_text="Embeddings of deleted messages searched with.")
    of = serializers.IntegerField(
        required=False, help_text="Deleted messages with an embedding; `probes` are the first of them."
    )
    threshold = serializers.FloatField(help_text="Cosine similarity a neighbour needs (the context threshold).")
    new_neighbours = serializers.ListField(
        child=serializers.IntegerField(), help_text="Live messages near a deleted one that were not before."
    )
    lexical_floor = serializers.FloatField(
        required=False, help_text="The lexical floor a match reaches (DELLM_LEXICAL_FLOOR), as in retrieval."
    )
    new_lexical_neighbours = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="Live messages matching a deleted one's words past the floor that did not before.",
    )
    not_run = serializers.CharField(
        required=False,
        help_text="Only when the check could not run: the process verifying the deletion stopped before its "
        "receipt (then `passed` is false).",
    )


class PurgeCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    checked = serializers.IntegerField()
    with_content = serializers.ListField(child=serializers.IntegerField())
    with_embedding = serializers.ListField(child=serializers.IntegerField())


class RegenerationCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    total = serializers.IntegerField(help_text="Replies to rewrite.")
    rewritten = serializers.ListField(child=serializers.IntegerField(), help_text="Ids of the rewritten replies.")
    failed = serializers.ListField(
        child=serializers.IntegerField(), help_text="Old reply ids not rewritten (resumable)."
    )
    pending = serializers.ListField(child=serializers.IntegerField(), help_text="Old reply ids still to rewrite.")
    taint_violations = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()), help_text="I1 after the rewrites."
    )
    context_violations = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="[rewritten reply, context message that is not live] pairs.",
    )


class IndexesCheckSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    recomputed = serializers.IntegerField(help_text="Indexes this deletion rebuilt from live turns.")
    stale = serializers.ListField(
        child=serializers.IntegerField(), help_text="Live messages whose index is still built from a deleted one."
    )


class ReceiptChecksSerializer(serializers.Serializer):
    taint = TaintCheckSerializer()
    gone = GoneCheckSerializer()
    forget = ForgetCheckSerializer()
    purge = PurgeCheckSerializer(allow_null=True, help_text="Purges and expiries only.")
    regeneration = RegenerationCheckSerializer(
        required=False, help_text="Once the rewrites of a regenerating deletion have run."
    )
    indexes = IndexesCheckSerializer(required=False, help_text="Every deletion verified since indexes carry turns.")


class AgentReadSerializer(serializers.Serializer):
    client = serializers.CharField(help_text="The MCP client's name, as its `clientInfo` gave it.")
    tool = serializers.CharField(help_text="The tool that read: search_memory or explain.")
    read_at = serializers.DateTimeField()
    messages = serializers.ListField(child=serializers.IntegerField(), help_text="This deletion's messages it read.")


class AgentReadsSerializer(serializers.Serializer):
    """Which of a deletion's messages MCP clients were shown, by which client and when (chat.MemoryRead)."""

    count = serializers.IntegerField(help_text="Reads of any of these messages.")
    reads = AgentReadSerializer(many=True, help_text="The newest 50.")
    note = serializers.CharField(help_text="That DeLLM cannot erase the clients' copies; empty when none read.")


class ReceiptSerializer(serializers.Serializer):
    """What the checks run right after execution found: ids and counts."""

    passed = serializers.BooleanField()
    failed = serializers.ListField(child=serializers.CharField(), help_text="Names of the checks that failed.")
    checks = ReceiptChecksSerializer()
    agent_reads = AgentReadsSerializer(
        required=False, help_text="Only if MCP clients read any of its messages: those reads when it executed."
    )
