"""Turn channels (chat/turns/stream.py)."""

from django.test import override_settings

from chat.turns.stream import channel


def test_a_turn_channel_is_namespaced_by_the_instance():
    here = channel(1)
    assert channel(1) == here
    assert channel(2) != here
    # The same turn id of another instance sharing this Redis is another channel.
    with override_settings(DELLM_REDIS_PREFIX="dellm-elsewhere"):
        assert channel(1) != here
