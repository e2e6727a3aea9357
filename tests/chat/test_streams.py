"""Turn channels (chat/streams.py)."""

from django.db import connection

from chat.streams import channel


def test_a_turn_channel_is_namespaced_by_its_database(monkeypatch):
    here = channel(1)
    assert channel(1) == here
    assert channel(2) != here
    monkeypatch.setitem(connection.settings_dict, "NAME", connection.settings_dict["NAME"] + "_elsewhere")
    # The same turn id in another database sharing this Redis is another channel.
    assert channel(1) != here
