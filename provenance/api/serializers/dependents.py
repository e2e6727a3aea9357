"""Serializers of a message's dependents and the path that explains one."""

from typing import Any

from django.conf import settings
from rest_framework import serializers

from provenance.api.serializers.deletions import MAX_DEPTH


class DependentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    status = serializers.CharField()
    path = serializers.ListField(child=serializers.IntegerField(), help_text="Ids from the root to this message.")


class DependentsSerializer(serializers.Serializer):
    root = serializers.IntegerField()  # type: ignore[assignment]
    dependents = DependentSerializer(
        many=True,
        help_text="The nearest `paths` (default and at most DELLM_MAX_EXPLANATION_PATHS) dependents, in sequence "
        "order, each with its path; GET .../dependents/{id}/ gives any other one's.",
    )
    ids = serializers.ListField(child=serializers.IntegerField(), help_text="All of Dep(m) minus m, ascending.")
    count = serializers.IntegerField(help_text="All of Dep(m) minus m.")
    live = serializers.IntegerField(
        help_text="The live ones of `count`: what a soft deletion of m removes with it (the rest are removed already)."
    )
    truncated = serializers.BooleanField(help_text="True when `dependents` lists fewer than `count`.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # The declared fields describe the schema; the body is built directly:
        # `ids` may hold 100,000 integers and a field per element would cost
        # more than the walk that found them.
        return {
            "root": instance["root"],
            "dependents": [
                {"id": d.id, "seq": d.seq, "role": d.role, "status": d.status, "path": list(d.path)}
                for d in instance["dependents"]
            ],
            "ids": list(instance["ids"]),
            "count": instance["count"],
            "live": instance["live"],
            "truncated": instance["truncated"],
        }


class DependentPathSerializer(serializers.Serializer):
    root = serializers.IntegerField()  # type: ignore[assignment]
    id = serializers.IntegerField()
    path = serializers.ListField(
        child=serializers.IntegerField(), help_text="A shortest path [root, ..., id], as `dependents` lists it."
    )


class DependentsQuerySerializer(serializers.Serializer):
    depth = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_DEPTH, help_text="Taint level limit; default none."
    )
    paths = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="How many dependents to list with their paths (default and at most "
        "DELLM_MAX_EXPLANATION_PATHS; 0: ids and count only).",
    )

    def validate_paths(self, value: int) -> int:
        return min(value, settings.DELLM_MAX_EXPLANATION_PATHS)


class DependentPathQuerySerializer(serializers.Serializer):
    depth = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_DEPTH, help_text="Taint level limit; default none."
    )
