"""Page-number and cursor pagination, with RFC 8288 Link headers (docs/API.md, "Pagination")."""

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.client_input import whole_number
from core.errors import ValidationFailed


class Pagination(PageNumberPagination):
    """`?page=` and `?page_size=` (at most DELLM_MAX_PAGE_SIZE: larger asks are refused)."""

    page_size_query_param = "page_size"

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return settings.DELLM_PAGE_SIZE
        limit = settings.DELLM_MAX_PAGE_SIZE
        size = whole_number(raw, digits=len(str(limit)))
        if size is None or not 1 <= size <= limit:
            raise ValidationFailed(
                f"page_size must be a whole number from 1 to {limit}.", fields={"page_size": "out of range"}
            )
        return size

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] |= {"minimum": 1, "maximum": settings.DELLM_MAX_PAGE_SIZE}
            if parameter["name"] == self.page_query_param:
                parameter["schema"] |= {"minimum": 1}
        return parameters


class LinkHeaderPagination(Pagination):
    """Pages of a list whose body stays a bare JSON array (API.md's shape for it).

    `?page=` and `?page_size=` as everywhere; the next and previous pages are
    in a `Link` header (rel="next"/"prev", RFC 8288) and the total in
    `X-Total-Count`, so clients that read the array keep working.
    """

    def get_paginated_response(self, data: Any) -> Response:
        links = [
            f'<{url}>; rel="{rel}"'
            for rel, url in (("next", self.get_next_link()), ("prev", self.get_previous_link()))
            if url
        ]
        assert self.page is not None  # paginate_queryset ran first
        headers = {"X-Total-Count": str(self.page.paginator.count)}
        if links:
            headers["Link"] = ", ".join(links)
        return Response(data, headers=headers)

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return schema


class LinkHeaderCursorPagination(CursorPagination):
    """Pages of a long list read by position (`?cursor=`), the body a bare JSON array.

    Keyset pages: each costs the same however deep it is, and a row added
    while a client pages does not shift the pages after it. `?page_size=` as
    everywhere; the next and previous pages are in a `Link` header
    (rel="next"/"prev"). No total: counting would cost what paging saves.
    A subclass sets `ordering`.
    """

    page_size_query_param = "page_size"
    get_page_size = Pagination.get_page_size

    def decode_cursor(self, request: Request) -> Any:
        try:
            cursor = super().decode_cursor(request)
            if cursor is None or self.position_valid(cursor.position):
                return cursor
        except exceptions.NotFound:  # DRF's answer to a cursor it cannot decode
            pass
        raise ValidationFailed(
            "cursor is not one this server gave out; follow the Link header.", fields={"cursor": "invalid"}
        )

    def position_valid(self, position: Any) -> bool:
        """Whether a cursor's position can be compared with the first `ordering` field (a subclass checks)."""
        return True

    def get_paginated_response(self, data: Any) -> Response:
        links = [
            f'<{url}>; rel="{rel}"'
            for rel, url in (("next", self.get_next_link()), ("prev", self.get_previous_link()))
            if url
        ]
        return Response(data, headers={"Link": ", ".join(links)} if links else {})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return schema
