"""Secure by default: settings read in fresh processes, as a server would."""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

from tests.helpers import ROOT

BASE_DIR = ROOT
PUBLISHED_KEY = "dellm-insecure-dev-key-change-me"


def _environment(data_dir: Path, **extra: str) -> dict[str, str]:
    """This process's services (so no server starts), and nothing else of DeLLM's or Django's."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DELLM_"))}
    return keep | {"DELLM_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "dellm_site.settings"} | extra


def _settings_of(env: dict[str, str]) -> list[str]:
    code = "from django.conf import settings as s; print(s.DEBUG); print(s.SECRET_KEY)"
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=BASE_DIR, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.split()


def test_debug_is_off_and_the_key_is_random_and_kept(tmp_path):
    env = _environment(tmp_path)
    debug, key = _settings_of(env)
    assert debug == "False"
    assert key != PUBLISHED_KEY and len(key) >= 50
    kept = tmp_path / "secret_key"
    assert kept.read_text() == key
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert _settings_of(env) == ["False", key]
    assert _settings_of(_environment(tmp_path / "elsewhere"))[1] != key
    assert _settings_of(env | {"DJANGO_DEBUG": "true", "DJANGO_SECRET_KEY": "k" * 60}) == ["True", "k" * 60]


def _production_lines() -> dict[str, str]:
    text = (BASE_DIR / ".env.example").read_text()
    block = text.split("# --- Production", 1)[1].split("\n# ---", 1)[0]
    return dict(re.findall(r"^# ([A-Z_]+)=(\S+)$", block, re.MULTILINE))


def test_deploy_check_passes_for_the_documented_production_configuration(tmp_path):
    production = _production_lines()
    assert {"DJANGO_ALLOWED_HOSTS", "DELLM_HTTPS"} <= set(production)
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    result = subprocess.run(
        command, env=_environment(tmp_path, **production), cwd=BASE_DIR, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    # And the defaults alone do not pass: the check is real.
    bare = subprocess.run(command, env=_environment(tmp_path), cwd=BASE_DIR, capture_output=True, text=True)
    assert bare.returncode != 0
    assert "security.W008" in bare.stderr + bare.stdout


@pytest.mark.parametrize("debug", [True, False])
def test_development_mode_says_so_on_the_page(owner, debug):
    client = Client()
    client.force_login(owner)
    with override_settings(DEBUG=debug):
        page = client.get("/")
    assert (b'data-testid="development-mode"' in page.content) is debug
