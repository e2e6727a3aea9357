"""A bounded schemathesis run: every operation of /api/schema/ with generated input; no 500, no off-schema answer."""

import json

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from core.auth.tokens import token_create
from dellm_site.wsgi import application
from provenance.deletions.preview import deletion_preview
from tests.factories import make_edge, make_message

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def auth(owner) -> dict:
    return {"Authorization": f"Token {token_create(user=owner)[1]}"}


@pytest.fixture
def _keep_test_connection():
    """Like Django's test client: the raw WSGI app must not close the test's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def _history(owner, thread, _keep_test_connection):
    question = make_message(thread, "I live in Paris")
    reply = make_message(thread, "Noted: I live in Paris", role="assistant")
    make_edge(question, reply, rank=0, score=1.0)
    deletion_preview(owner=owner, actor=owner, mode="soft", ids=[question.pk])


def served_schema() -> dict:
    """What /api/schema/ serves (checked below), built without a request so it loads at collection."""
    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


schema = schemathesis.openapi.from_dict(served_schema())
schema.app = application


def test_schema_endpoint_serves_the_tested_schema(api):
    response = api.get("/api/schema/")
    assert response.status_code == 200
    assert json.loads(response.content) == served_schema()


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_schema(case, auth):
    case.call_and_validate(headers=auth, checks=CHECKS)


def test_docs_page_and_yaml_schema_for_a_logged_in_user(owner, client):
    client.force_login(owner)
    assert client.get("/api/docs/").status_code == 200
    yaml = client.get("/api/schema/?format=yaml")
    assert yaml.status_code == 200
    assert yaml.content.startswith(b"openapi: 3")
