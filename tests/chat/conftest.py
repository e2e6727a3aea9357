from tests.api.conftest import _fresh_throttle, api, client_for, other_api  # noqa: F401 (fixtures)
