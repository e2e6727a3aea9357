"""Types the apps share."""

from typing import TYPE_CHECKING

from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.request import Request

if TYPE_CHECKING:

    class AuthenticatedRequest(Request):
        """What an API view gets: every one requires `IsAuthenticated` (the default), so its user is a User."""

        @property
        def user(self) -> User: ...

        @user.setter
        def user(self, value: User) -> None: ...

    class StaffRequest(HttpRequest):
        """What a staff page gets: `admin_site.admin_view` lets only signed-in staff through."""

        user: User

else:
    AuthenticatedRequest = Request
    StaffRequest = HttpRequest

__all__ = ["AuthenticatedRequest", "StaffRequest", "User"]
