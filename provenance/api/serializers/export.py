"""Serializers of the export."""

from rest_framework import serializers

from chat.serializers import MessageSerializer, ThreadSerializer
from provenance.api.serializers.deletions import DeletionSerializer


class ExportEdgeSerializer(serializers.Serializer):
    source = serializers.IntegerField(source="source_id")  # type: ignore[assignment]
    target = serializers.IntegerField(source="target_id")
    score = serializers.FloatField()
    rank = serializers.IntegerField()
    signal = serializers.CharField()


class ExportSerializer(serializers.Serializer):
    exported_at = serializers.DateTimeField()
    username = serializers.CharField()
    threads = ThreadSerializer(many=True)
    messages = MessageSerializer(many=True, help_text="Active messages only.")
    edges = ExportEdgeSerializer(many=True, help_text="Edges among the exported messages.")
    deletions = DeletionSerializer(many=True, help_text="Deletion history: ids and counts, no deleted text.")
