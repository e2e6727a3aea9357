"""Parsers of other tools' chat histories: pure functions, no database."""

import io
import json
import zipfile
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat.imports.formats import ImportFormatError, Limits, ZipLimits, parse_file
from tests.helpers import FIXTURES

CHATGPT = (FIXTURES / "chatgpt_conversations.json").read_bytes()
CLAUDE = (FIXTURES / "claude_conversations.json").read_bytes()


def summary(result):
    return [(c.source_id, c.title, [(m.source_id, m.role, m.text) for m in c.messages]) for c in result.conversations]


def test_chatgpt_active_branch_only_text_parts_no_hidden_or_tool_messages():
    result = parse_file(CHATGPT)
    assert result.format == "chatgpt"
    assert result.errors == []
    assert summary(result) == [
        (
            "664a1f2e-0b3c-8005-a1b2-lisbon",
            "Trip to Lisbon",
            [
                ("aaa2b1c0-u1", "user", "I'm planning a trip to Lisbon in May. Where should I stay?"),
                ("c3f9e8b2-a1", "assistant", "Alfama is charming but hilly; Chiado is central and lively."),
                ("aaa2d4e5-u2", "user", "Here is the hotel I booked. Is it in Chiado?"),
                ("f7a8b9c0-a2", "assistant", "Yes, it is in Chiado, near the Baixa-Chiado metro station."),
                ("aaa2f0e1-u3", "user", "Thanks! Also, I am allergic to peanuts."),
                ("0a1b2c3d-a3", "assistant", "Noted. Pastel de nata has no peanuts, so you can enjoy it."),
            ],
        ),
        (
            "664b7c9d-1e2f-8005-b3c4-python",
            "Sorting in Python",
            [
                ("aaa1-u1", "user", "How do I sort a list of dicts by a key?"),
                ("aaa1-a1", "assistant", 'Use sorted(items, key=lambda d: d["name"]).'),
            ],
        ),
    ]
    first = result.conversations[0]
    assert first.created_at == datetime.fromtimestamp(1714557600.123456, tz=UTC)
    assert first.messages[0].created_at == datetime.fromtimestamp(1714557600.5, tz=UTC)


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_chatgpt_zip_reads_conversations_json_only():
    data = _zip({"chat.html": b"<html>", "user.json": b"{}", "conversations.json": CHATGPT, "file-9XyZ.jpg": b"\xff"})
    assert summary(parse_file(data)) == summary(parse_file(CHATGPT))


def test_zip_without_conversations_json_is_refused():
    with pytest.raises(ImportFormatError) as caught:
        parse_file(_zip({"chat.html": b"<html>"}))
    assert (caught.value.field, caught.value.message) == ("conversations.json", "The zip has no conversations.json.")


def test_zip_bomb_is_refused_while_reading():
    bomb = _zip({"conversations.json": b"[" + b" " * 5_000_000 + b"]"})
    assert len(bomb) < 50_000
    with pytest.raises(ImportFormatError) as caught:
        parse_file(bomb, zip_limits=ZipLimits(max_member_bytes=1_000_000, max_total_bytes=10_000_000))
    assert caught.value.message == "conversations.json is larger than 1000000 bytes."


def test_zip_path_traversal_names_are_never_extracted():
    data = _zip({"../../etc/conversations.json": CHATGPT})
    # Read by name in memory: the member is parsed, nothing is written anywhere.
    assert summary(parse_file(data)) == summary(parse_file(CHATGPT))


def test_chatgpt_malformed_conversation_is_reported_by_id_and_field_others_kept():
    document = json.loads(CHATGPT)
    del document[1]["current_node"]
    document[0]["mapping"]["aaa2d4e5-u2"]["message"]["author"] = {}
    result = parse_file(json.dumps(document).encode())
    assert result.conversations == []
    assert [e.as_dict() for e in result.errors] == [
        {
            "conversation": "664a1f2e-0b3c-8005-a1b2-lisbon",
            "field": "mapping.aaa2d4e5-u2.message.author.role",
            "message": "is missing",
        },
        {
            "conversation": "664b7c9d-1e2f-8005-b3c4-python",
            "field": "current_node",
            "message": "is missing or not a node id",
        },
    ]


def test_chatgpt_missing_parent_and_cycle_are_errors():
    document = json.loads(CHATGPT)[1:]
    document[0]["mapping"]["aaa1-u1"]["parent"] = "nowhere"
    [error] = parse_file(json.dumps(document).encode()).errors
    assert (error.field, error.message) == ("mapping.nowhere", "is referenced as a parent but missing")
    document[0]["mapping"]["aaa1-u1"]["parent"] = "aaa1-a1"
    [error] = parse_file(json.dumps(document).encode()).errors
    assert (error.field, error.message) == ("mapping.aaa1-a1.parent", "forms a cycle")


def test_claude_prefers_text_blocks_falls_back_to_text_skips_empty():
    result = parse_file(CLAUDE)
    assert result.format == "claude"
    assert summary(result) == [
        (
            "2f6b1c9e-8a4d-4e2b-9c1f-0a7d3e5b6c21",
            "Garden planning",
            [
                ("a1b2c3d4-0001-4e5f-8a9b-0c1d2e3f4a5b", "user", "My balcony faces north. What herbs will grow there?"),
                (
                    "a1b2c3d4-0002-4e5f-8a9b-0c1d2e3f4a5b",
                    "assistant",
                    "Mint, parsley and chives tolerate shade well.\nAvoid basil and rosemary: they want full sun.",
                ),
                ("a1b2c3d4-0004-4e5f-8a9b-0c1d2e3f4a5b", "user", "I live in Utrecht, if that matters."),
                (
                    "a1b2c3d4-0005-4e5f-8a9b-0c1d2e3f4a5b",
                    "assistant",
                    "Utrecht's mild climate suits mint and chives all year.",
                ),
            ],
        ),
        (
            "7c3e9a1d-2b4f-4a6c-8e0d-1f2a3b4c5d6e",
            "",
            [
                ("b2c3d4e5-0001-4f60-9a1b-2c3d4e5f6a7b", "user", "What is a good name for a grey cat?"),
                ("b2c3d4e5-0002-4f60-9a1b-2c3d4e5f6a7b", "assistant", "Ash, Smokey or Pebble."),
            ],
        ),
    ]
    assert result.conversations[1].created_at == datetime(2023, 11, 20, 18, tzinfo=UTC)


def test_claude_bad_sender_names_conversation_and_field():
    document = json.loads(CLAUDE)
    document[1]["chat_messages"][1]["sender"] = "system"
    result = parse_file(json.dumps(document).encode())
    assert [c.source_id for c in result.conversations] == ["2f6b1c9e-8a4d-4e2b-9c1f-0a7d3e5b6c21"]
    assert [e.as_dict() for e in result.errors] == [
        {
            "conversation": "7c3e9a1d-2b4f-4a6c-8e0d-1f2a3b4c5d6e",
            "field": "chat_messages[1].sender",
            "message": "must be human or assistant",
        }
    ]


JSONL = b"""{"conversation": "trip", "role": "user", "content": "I like window seats.", "title": "Flights"}
{"conversation": 7, "role": "user", "content": "hello", "created_at": 1714557600}

{"conversation": "trip", "role": "assistant", "content": "Window seat noted.", "created_at": "2024-05-01T12:00:00"}
{"conversation": "trip", "id": "x9", "role": "user", "content": "Thanks"}
"""


def test_jsonl_groups_by_conversation_in_first_appearance_order():
    result = parse_file(JSONL)
    assert result.format == "jsonl"
    assert summary(result) == [
        (
            "trip",
            "Flights",
            [
                ("#1", "user", "I like window seats."),
                ("#2", "assistant", "Window seat noted."),
                ("x9", "user", "Thanks"),
            ],
        ),
        ("7", "", [("#1", "user", "hello")]),
    ]
    assert result.conversations[0].messages[1].created_at == datetime(2024, 5, 1, 12, tzinfo=UTC)


def test_jsonl_bad_role_names_line_and_conversation():
    result = parse_file(JSONL.replace(b'"role": "assistant"', b'"role": "robot"'))
    assert [e.as_dict() for e in result.errors] == [
        {"conversation": "trip", "field": "line 4.role", "message": "must be user or assistant"}
    ]
    assert [c.source_id for c in result.conversations] == ["7"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"",
            "The file is neither JSON nor JSONL: supported are ChatGPT's and Claude's exports (conversations.json, "
            "or ChatGPT's zip), DeLLM's export and JSONL.",
        ),
        (b'{"hello": 1}', "Unsupported file: not a ChatGPT or Claude conversations.json, a DeLLM export or JSONL."),
        (b"[]", "The file holds no conversations."),
        (b"\xff\xfe\x00", "The file is not UTF-8 text, a JSON export or a zip."),
        (b"PK\x03\x04broken", "The zip file is damaged."),
    ],
)
def test_unsupported_files_get_a_clear_error(data, message):
    with pytest.raises(ImportFormatError) as caught:
        parse_file(data)
    assert caught.value.message == message


def test_forced_format_is_used_and_unknown_format_refused():
    result = parse_file(CHATGPT, format="claude")
    assert result.format == "claude"
    assert [e.field for e in result.errors] == ["uuid", "uuid"]
    with pytest.raises(ImportFormatError) as caught:
        parse_file(CHATGPT, format="gemini")
    assert caught.value.field == "format"


def test_limits_conversations_messages_and_characters():
    with pytest.raises(ImportFormatError) as caught:
        parse_file(CHATGPT, limits=Limits(max_conversations=1))
    assert caught.value.message == "The file has 2 conversations; at most 1 can be imported at once."
    with pytest.raises(ImportFormatError):
        parse_file(CHATGPT, limits=Limits(max_messages=7))
    result = parse_file(CHATGPT, limits=Limits(max_conversation_messages=2))
    assert [e.as_dict() for e in result.errors] == [
        {
            "conversation": "664a1f2e-0b3c-8005-a1b2-lisbon",
            "field": "messages",
            "message": "has more than 2 messages on its active branch",
        }
    ]
    result = parse_file(CLAUDE, limits=Limits(max_message_chars=40))
    assert [(e.conversation, e.field) for e in result.errors] == [
        ("2f6b1c9e-8a4d-4e2b-9c1f-0a7d3e5b6c21", "chat_messages[0].content")
    ]


# --- Properties ----------------------------------------------------------------


@st.composite
def chatgpt_trees(draw):
    """A conversation tree: an active chain from the root plus side branches hanging off it."""
    chain_roles = draw(st.lists(st.sampled_from(["user", "assistant", "system", "tool"]), min_size=1, max_size=12))
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    chain = []
    parent = "root"
    for index, role in enumerate(chain_roles):
        node_id = f"n{index}"
        text = draw(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20))
        mapping[node_id] = {
            "id": node_id,
            "message": {
                "id": node_id,
                "author": {"role": role},
                "create_time": None,
                "content": {"content_type": "text", "parts": [text]},
                "metadata": {},
                "recipient": "all",
            },
            "parent": parent,
            "children": [],
        }
        mapping[parent]["children"].append(node_id)
        if role in ("user", "assistant") and text.strip():
            chain.append((node_id, role, text.strip()))
        parent = node_id
    current = parent
    for index, at in enumerate(draw(st.lists(st.sampled_from(sorted(mapping)), max_size=6))):
        node_id = f"side{index}"
        mapping[node_id] = {
            "id": node_id,
            "message": {
                "id": node_id,
                "author": {"role": "assistant"},
                "content": {"content_type": "text", "parts": ["side"]},
            },
            "parent": at,
            "children": [],
        }
        mapping[at]["children"].append(node_id)
    order = draw(st.permutations(sorted(mapping)))
    conversation = {"id": "c1", "title": "t", "mapping": {k: mapping[k] for k in order}, "current_node": current}
    return conversation, chain


@settings(max_examples=60, deadline=None)
@given(chatgpt_trees())
def test_property_chatgpt_keeps_exactly_the_active_chain(tree):
    conversation, chain = tree
    result = parse_file(json.dumps([conversation]).encode())
    assert result.errors == []
    assert [(m.source_id, m.role, m.text) for m in result.conversations[0].messages] == chain


jsonl_messages = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["user", "assistant"]),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=15).filter(str.strip),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(jsonl_messages)
def test_property_jsonl_interleaved_lines_round_trip(rows):
    data = "\n".join(json.dumps({"conversation": c, "role": r, "content": t}) for c, r, t in rows).encode()
    result = parse_file(data, format="jsonl")
    expected: dict[str, list] = {}
    for c, r, t in rows:
        expected.setdefault(c, []).append((r, t.strip()))
    assert [(c.source_id, [(m.role, m.text) for m in c.messages]) for c in result.conversations] == list(
        expected.items()
    )
    assert [m.source_id for c in result.conversations for m in c.messages] == [
        f"#{i}" for c in expected.values() for i in range(1, len(c) + 1)
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=64),
        st.builds(
            lambda conv: json.dumps([conv]).encode(),
            st.fixed_dictionaries({"mapping": json_values, "current_node": json_values, "id": json_values}),
        ),
        st.builds(
            lambda conv: json.dumps([conv]).encode(),
            st.fixed_dictionaries({"uuid": json_values, "chat_messages": st.lists(json_values, max_size=3)}),
        ),
        st.builds(
            lambda doc: json.dumps(doc).encode(),
            st.fixed_dictionaries(
                {"username": json_values, "threads": json_values, "messages": json_values, "edges": json_values}
            ),
        ),
    )
)
def test_property_any_input_parses_or_fails_with_a_format_error(data):
    try:
        result = parse_file(data)
    except ImportFormatError:
        return
    assert all(m.text and m.role in ("user", "assistant", "summary") for c in result.conversations for m in c.messages)


def dellm_export(*edges, roles=("user", "assistant")):
    return json.dumps(
        {
            "username": "alice",
            "threads": [{"id": 1, "title": "t"}],
            "messages": [
                {"id": index + 1, "thread": 1, "seq": index + 1, "role": role, "content": f"m{index + 1}"}
                for index, role in enumerate(roles)
            ],
            "edges": list(edges),
        }
    ).encode()


def test_dellm_edges_keep_their_signal_and_scores_become_floats():
    result = parse_file(
        dellm_export(
            {"source": 1, "target": 2, "rank": 0, "score": 1, "signal": ""},
            {"source": 2, "target": 1, "rank": 32767, "score": 0.25, "signal": "vector"},
        )
    )
    assert result.errors == []
    assert [(e.source, e.target, e.rank, e.score, type(e.score), e.signal) for e in result.edges] == [
        ("alice:1", "alice:2", 0, 1.0, float, ""),
        ("alice:2", "alice:1", 32767, 0.25, float, "vector"),
    ]
    [conversation] = result.conversations
    assert [(m.exported_id, m.exported_thread) for m in conversation.messages] == [(1, 1), (2, 1)]


@pytest.mark.parametrize(
    ("edge", "field", "message"),
    [
        (
            {"signal": "telepathy"},
            "edges[0].signal",
            "must be one of agent, both, lexical, read, system, tool, transcript, vector or empty",
        ),
        (
            {"signal": 3},
            "edges[0].signal",
            "must be one of agent, both, lexical, read, system, tool, transcript, vector or empty",
        ),
        ({"score": "high"}, "edges[0].score", "is not a number"),
        ({"score": True}, "edges[0].score", "is not a number"),
        ({"score": 10**400}, "edges[0].score", "is not a finite number"),
        ({"rank": 32768}, "edges[0].rank", "must be from 0 to 32767"),
        ({"rank": -1}, "edges[0].rank", "must be from 0 to 32767"),
    ],
)
def test_dellm_bad_edge_fields_are_named(edge, field, message):
    result = parse_file(dellm_export({"source": 1, "target": 2, **edge}))
    assert (result.conversations, result.edges) == ([], [])
    assert [e.as_dict() for e in result.errors] == [
        {"conversation": "alice (the whole export)", "field": field, "message": message}
    ]


def test_dellm_infinite_scores_duplicate_ids_and_edges_into_a_system_prompt_are_refused():
    infinite = dellm_export().replace(b'"edges": []', b'"edges": [{"source": 1, "target": 2, "score": 1e400}]')
    duplicate = json.loads(dellm_export())
    duplicate["messages"][1]["id"] = 1
    cases = [
        (infinite, "edges[0].score", "is not a finite number"),
        (json.dumps(duplicate).encode(), "messages[1].id", "names a message listed before"),
        (
            dellm_export({"source": 1, "target": 2}, roles=("user", "system")),
            "edges[0].target",
            "is a system prompt, which derives from nothing",
        ),
    ]
    for data, field, message in cases:
        assert [(e.field, e.message) for e in parse_file(data).errors] == [(field, message)]
