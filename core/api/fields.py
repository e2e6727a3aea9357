"""Serializer fields that take JSON as it was sent: DRF's own would turn other types into the one expected.

DRF's CharField takes 12345 as "12345" and its BooleanField takes "yes", "on"
and 1 as true, so a redaction given a number replaced a message by its
digits, and `"may_confirm_deletions": "yes"` let agents confirm deletions.
DRF's DateTimeField reads a time without a zone in the server's zone. These
refuse instead (400 `validation_error`, nothing changes).
"""

from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A JSON string only."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO-8601 date and time with its time zone (an offset or Z)."""

    default_error_messages = {"naive": "Give the time zone: an offset such as +01:00, or Z for UTC."}

    def to_internal_value(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:  # well formed, no such date ("2099-13-01T10:00"): DRF's own "invalid" below
                parsed = None
            if parsed is not None and parsed.tzinfo is None:
                self.fail("naive")
        return super().to_internal_value(value)
