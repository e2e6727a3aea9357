"""Serializers of the export."""

from rest_framework import serializers

from chat.models import Message
from chat.serializers import MessageSerializer, ThreadSerializer
from provenance.api.serializers.deletions import DeletionSerializer


class ExportEdgeSerializer(serializers.Serializer):
    source = serializers.IntegerField(source="source_id")  # type: ignore[assignment]
    target = serializers.IntegerField(source="target_id")
    score = serializers.FloatField()
    rank = serializers.IntegerField()
    signal = serializers.CharField()


class ExportMessageSerializer(MessageSerializer):
    """A message of the export: a fact (role `fact`) also names its subject; the context maps ids to subjects."""

    subject = serializers.SerializerMethodField(
        help_text="A fact's subject (one of the closed list of chat/subjects.py); null for every other message. "
        "Its edges (signal `fact`) come from the messages it was drawn from."
    )

    class Meta(MessageSerializer.Meta):
        fields = [*MessageSerializer.Meta.fields, "subject"]

    def get_subject(self, message: Message) -> str | None:
        # `context` is a field of MessageSerializer's (a message's sources): the serializer's context is `_context`.
        subjects: dict[int, str] = getattr(self.root, "_context", {}).get("subjects", {})
        return subjects.get(message.pk)


class ExportSerializer(serializers.Serializer):
    exported_at = serializers.DateTimeField()
    username = serializers.CharField()
    threads = ThreadSerializer(many=True, help_text="Every thread its messages name, the facts thread included.")
    messages = ExportMessageSerializer(many=True, help_text="Active messages only, facts included.")
    edges = ExportEdgeSerializer(many=True, help_text="Edges among the exported messages.")
    deletions = DeletionSerializer(many=True, help_text="Deletion history: ids and counts, no deleted text.")
