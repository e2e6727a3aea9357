"""Two DeLLM instances on one Redis: each worker takes only its own instance's tasks."""

import time

import pytest
import redis
from django.conf import settings

from chat.models import Turn
from chat.turns.start import turn_create
from chat.turns.stream import channel
from chat.turns.tasks import turn_run_task
from dellm_site.celery import app as celery_app
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_of_another_instance_does_not_take_this_instances_tasks(start_worker, thread):
    turn = turn_create(thread=thread, content="Which worker takes me?", enqueue=False)
    # Same Redis, same queue name, another instance prefix.
    foreign = start_worker({"DELLM_REDIS_PREFIX": "dellm-another-instance"})
    queue = celery_app.conf.task_default_queue
    assert queue == foreign.queue

    turn_run_task.delay(turn_id=turn.pk, owner_id=turn.owner_id)
    time.sleep(2)  # the foreign worker is already waiting on its own queue key
    r = redis.Redis.from_url(settings.REDIS_URL)
    assert r.llen(f"{settings.DELLM_REDIS_PREFIX}:{queue}") == 1
    assert r.llen(queue) == 0
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.PENDING

    ours = start_worker({"DELLM_CELERY_QUEUE": queue})
    wait_for(lambda: Turn.objects.get(pk=turn.pk).status == Turn.Status.DONE, timeout=60)
    assert "Task chat.turn_run[" in ours.log.read_text()
    assert "Task chat.turn_run[" not in foreign.log.read_text()


def test_turn_channels_carry_the_instance_prefix():
    assert channel(42) == f"{settings.DELLM_REDIS_PREFIX}:turn:42"
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] == f"{settings.DELLM_REDIS_PREFIX}:"
