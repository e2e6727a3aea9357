"""Serializers of facts (`/api/facts/`): a fact with its subject, state, dates and sources; the user's decisions."""

from typing import Any

from rest_framework import serializers

from chat.subjects import SUBJECTS
from core.api.fields import StrictCharField
from provenance.api.serializers.deletions import DeletionSerializer


class FactSourceSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="A live message the fact was drawn from.")
    thread = serializers.IntegerField(source="thread_id")
    seq = serializers.IntegerField()
    said_at = serializers.DateTimeField()


class FactBaseSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="message.pk")
    seq = serializers.IntegerField(source="message.seq")
    subject = serializers.ChoiceField(choices=list(SUBJECTS))
    subject_label = serializers.SerializerMethodField()
    text = serializers.CharField(source="message.content")
    # Text, not an enum: another "state" (a regeneration's) names its enum in the schema.
    state = serializers.CharField(
        help_text="current, or superseded: a newer fact of the same single-valued subject (a home city, an "
        "employer) is live.",
    )
    superseded_by = serializers.IntegerField(allow_null=True)
    decision = serializers.ChoiceField(choices=["", "approved"], help_text="approved: the user confirmed it.")
    extractor = serializers.CharField(help_text="rules (offline), model, or user (a correction).")
    said_at = serializers.DateTimeField(help_text="When its newest live source was said.")
    created_at = serializers.DateTimeField(source="message.created_at")
    sources = FactSourceSerializer(many=True)

    def get_subject_label(self, view: Any) -> str:
        known = SUBJECTS.get(view.subject)
        return view.subject if known is None else known.label


class FactSerializer(FactBaseSerializer):
    pass


class FactDetailSerializer(FactBaseSerializer):
    history = FactBaseSerializer(
        many=True, help_text="The other live facts of its subject, newest said first (at most 20)."
    )


class FactCorrectSerializer(serializers.Serializer):
    text = StrictCharField(trim_whitespace=False, help_text="The corrected statement, in your words (at most 300).")


class FactCorrectedSerializer(serializers.Serializer):
    fact = FactSerializer(help_text="The fact drawn from the correction.")
    deletion = DeletionSerializer(
        allow_null=True, help_text="A fact of a many-valued subject is removed too (declined): that deletion."
    )


class FactProgressSerializer(serializers.Serializer):
    pending = serializers.IntegerField(help_text="User messages not read for facts yet.")
    failed = serializers.ListField(
        child=serializers.IntegerField(), help_text="Messages whose extraction failed for good."
    )
    extractor = serializers.ChoiceField(choices=["rules", "model"])
