"""What every staff page of DeLLM shares: rows staff read and never edit, filtered only by the list's own filters."""

from django.contrib import admin
from django.contrib.admin.filters import SimpleListFilter
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """Rows written only by services (messages, the deletion audit): staff look, never edit."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        """Only the fields of the list's own filters and date hierarchy.

        Django's admin accepts any lookup on a model's own fields in the query string, so
        `?id__exact=7&content__startswith=I live in L` answered yes or no about a removed
        message's text, a character at a time. Anything else is a 400 (DisallowedModelAdminLookup).
        """
        filters = self.get_list_filter(request) if request is not None else self.list_filter
        allowed: set[object] = {self.date_hierarchy}
        for item in filters:
            if isinstance(item, type) and issubclass(item, SimpleListFilter):
                allowed.add(item.parameter_name)
            else:
                allowed.add(item[0] if isinstance(item, (list, tuple)) else item)
        name, *rest = lookup.split(LOOKUP_SEP)
        if name not in allowed:
            return False
        try:
            field = self.model._meta.get_field(name)
        except FieldDoesNotExist:
            return not rest  # a custom filter's own parameter
        if field.is_relation and field.related_model is not None and rest[:1] in (["pk"], [field.target_field.name]):
            rest = rest[1:]  # owner__id__exact: the related row's id, never its other columns
        return len(rest) <= 1 and all(part in field.get_lookups() for part in rest)
