"""Imports read as a stream: memory bounded by what is kept, adversarial files refused."""

import hashlib
import io
import json
import struct
import tracemalloc
import zipfile

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import given
from hypothesis import settings as settings_hypothesis
from hypothesis import strategies as st

from chat.imports import uploads
from chat.imports.formats import (
    CUT_SHORT,
    ImportFormatError,
    Limits,
    ParseResult,
    ZipLimits,
    archive,
    parse_file,
    sniff_file,
    stream,
)
from chat.imports.formats.stream import strings_capped
from chat.imports.history import (
    _conversations,
    import_limits,
    transcripts_store,
)
from chat.imports.jobs import MAX_ERRORS, errors_capped, import_job_create
from chat.imports.uploads import upload_open, upload_store
from chat.models import ImportJob, ImportUpload, Message
from tests.helpers import FIXTURES

CHATGPT = (FIXTURES / "chatgpt_conversations.json").read_bytes()
CLAUDE = (FIXTURES / "claude_conversations.json").read_bytes()
JSONL = b'{"conversation": "trip", "role": "user", "content": "I like window seats."}\n'


def bloated_chatgpt(*, conversations: int, messages: int, metadata: int) -> bytes:
    """The issue's export: each node's metadata a list of `metadata` small objects, which no parser reads."""
    document = []
    for c in range(conversations):
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for m in range(messages):
            node = f"c{c}-m{m}"
            mapping[node] = {
                "id": node,
                "message": {
                    "id": node,
                    "author": {"role": "user" if m % 2 == 0 else "assistant"},
                    "create_time": 1_700_000_000 + c * 3600 + m,
                    "content": {"content_type": "text", "parts": [f"message {m} of conversation {c}"]},
                    "metadata": [{"k": i, "v": "x"} for i in range(metadata)],
                    "recipient": "all",
                },
                "parent": parent,
                "children": [],
            }
            parent = node
        document.append({"id": f"conv-{c}", "title": f"C{c}", "mapping": mapping, "current_node": parent})
    return json.dumps(document).encode()


def summary(result):
    return [(c.source_id, c.title, [(m.source_id, m.role, m.text) for m in c.messages]) for c in result.conversations]


def peak_bytes(call) -> tuple[int, object]:
    tracemalloc.start()
    try:
        result = call()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def refusal(call, data) -> str:
    """The message of the ImportFormatError `call(data)` raises."""
    with pytest.raises(ImportFormatError) as caught:
        call(data)
    return caught.value.message


def test_parse_peak_memory_is_a_fraction_of_the_file_not_a_multiple():
    data = bloated_chatgpt(conversations=100, messages=10, metadata=300)
    assert len(data) > 6_000_000
    peak, result = peak_bytes(lambda: parse_file(data))
    assert (len(result.conversations), result.message_count, result.errors) == (100, 1000, [])
    # json.loads built every metadata object: 67 MB here, ten times the file. What is kept
    # here is 1,000 short messages plus one conversation's fields and a 64 KiB chunk.
    assert peak < len(data) // 6


def test_skipped_fields_change_nothing_in_the_result():
    lean = parse_file(bloated_chatgpt(conversations=3, messages=4, metadata=0))
    bloated = parse_file(bloated_chatgpt(conversations=3, messages=4, metadata=50))
    assert summary(bloated) == summary(lean)
    assert [m.created_at for c in bloated.conversations for m in c.messages] == [
        m.created_at for c in lean.conversations for m in c.messages
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 100_000,
        b'{"threads": ' + b"[" * 100_000,
        # Deep inside a field no parser reads: skipped, but its depth still counted.
        json.dumps([{"id": "c", "mapping": {}, "current_node": "x", "x": "NEST"}])
        .encode()
        .replace(b'"NEST"', b"[" * 5_000 + b"]" * 5_000),
    ],
)
def test_deep_nesting_is_a_format_error_not_a_recursion_error(data):
    with pytest.raises(ImportFormatError) as caught:
        parse_file(data)
    assert (caught.value.field, caught.value.message) == ("file", "The file nests deeper than 64 levels.")


def test_deep_nesting_in_a_jsonl_line_is_a_format_error():
    with pytest.raises(ImportFormatError) as caught:
        parse_file(b'{"conversation": "c", "role": "user", "content": ' + b"[" * 100_000, format="jsonl")
    assert caught.value.message == "Line 1 is not JSON."


def test_a_mapping_with_more_nodes_than_a_conversation_can_hold_is_refused_while_reading():
    mapping = {f"n{i}": {"parent": None} for i in range(25)}
    data = json.dumps([{"id": "c", "mapping": mapping, "current_node": "n0"}]).encode()
    result = parse_file(data, limits=Limits(max_conversation_messages=2))
    assert [e.as_dict() for e in result.errors] == [
        {"conversation": "c", "field": "mapping", "message": "has more than 20 nodes"}
    ]


def test_too_many_conversations_are_counted_not_built():
    data = json.dumps([json.loads(CHATGPT)[1] | {"id": f"c{i}"} for i in range(50)]).encode()
    with pytest.raises(ImportFormatError) as caught:
        parse_file(data, limits=Limits(max_conversations=3))
    assert caught.value.message == "The file has 50 conversations; at most 3 can be imported at once."


def test_dellm_edges_past_their_limit_are_refused():
    export = {
        "username": "alice",
        "threads": [{"id": 1}],
        "messages": [{"id": 1, "thread": 1, "seq": 1, "role": "user", "content": "a"}],
        "edges": [{"source": 1, "target": 1}] * 11,
    }
    with pytest.raises(ImportFormatError) as caught:
        parse_file(json.dumps(export).encode(), limits=Limits(max_edges=10))
    assert (caught.value.field, caught.value.message) == ("edges", "The file has more than 10 edges; split it.")


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _lie_about_size(data: bytes, size: int) -> bytes:
    """The zip with its member's uncompressed size set to `size` in both headers."""
    out = bytearray(data)
    local = out.index(b"PK\x03\x04")
    out[local + 22 : local + 26] = struct.pack("<I", size)
    central = out.index(b"PK\x01\x02")
    out[central + 24 : central + 28] = struct.pack("<I", size)
    return bytes(out)


def test_a_zip_bomb_lying_in_its_headers_is_refused_while_reading_in_bounded_memory():
    bomb = _lie_about_size(_zip({"conversations.json": b"[" + b" " * 50_000_000 + b"]"}), 1_000)
    assert len(bomb) < 100_000
    peak, message = peak_bytes(lambda: refusal(parse_file, bomb))
    assert message == "conversations.json in the zip cannot be read."
    assert peak < 2_000_000


def test_a_zip_listing_too_many_files_is_refused_before_its_directory_is_read(monkeypatch):
    """`ZipFile` builds an object per entry: a 50 MB zip of empty entries, hundreds of megabytes."""
    monkeypatch.setattr(archive, "MAX_DIRECTORY_BYTES", 100_000)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("conversations.json", CHATGPT)
        for n in range(3_000):
            zf.writestr(f"files/{n:05}.png", b"")
    data = buffer.getvalue()
    for check in (sniff_file, parse_file):
        peak, message = peak_bytes(lambda check=check: refusal(check, data))
        assert message == "The zip lists too many files."
        assert peak < 1_000_000
    monkeypatch.setattr(archive, "MAX_DIRECTORY_BYTES", 1_000_000)
    assert parse_file(data).conversation_count == len(json.loads(CHATGPT))


def test_a_member_over_the_limit_is_refused_by_its_header_before_it_is_unpacked(monkeypatch):
    data = _zip({"conversations.json": CHATGPT})
    opened = []
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *args, **kwargs: opened.append(args))
    with pytest.raises(ImportFormatError) as caught:
        sniff_file(data, zip_limits=ZipLimits(max_member_bytes=len(CHATGPT) - 1))
    assert (caught.value.message, opened) == (f"conversations.json is larger than {len(CHATGPT) - 1} bytes.", [])


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (CHATGPT, "chatgpt"),
        (CLAUDE, "claude"),
        (JSONL * 3, "jsonl"),
        (json.dumps({"username": "a", "threads": [], "messages": [], "edges": []}).encode(), "dellm"),
        (_zip({"conversations.json": CHATGPT}), "chatgpt"),
        # The first conversation is longer than the peek, and has no `mapping` before it ends: the job tells.
        (json.dumps([{"uuid": "x" * 2_000_000, "chat_messages": []}]).encode(), None),
    ],
)
def test_sniff_tells_the_format_from_the_first_bytes(data, expected):
    assert sniff_file(data) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe\x00", "The file is not UTF-8 text, a JSON export or a zip."),
        (b"hello" + b" " * 3_000_000, "The file is neither JSON nor JSONL"),
        (b"[]", "The file holds no conversations."),
        (b'[{"a": 1}' + b" " * 3_000_000, "Unsupported file"),
        (b'{"hello": 1}', "Unsupported file"),
    ],
)
def test_sniff_refuses_what_the_first_bytes_show(data, message):
    with pytest.raises(ImportFormatError) as caught:
        sniff_file(data)
    assert caught.value.message.startswith(message)


def test_sniff_memory_is_the_peek_whatever_the_file_holds():
    data = bloated_chatgpt(conversations=60, messages=10, metadata=300)
    assert len(data) > 4_000_000
    peak, found = peak_bytes(lambda: sniff_file(data))
    assert found == "chatgpt"
    assert peak < 3_000_000


@pytest.mark.parametrize(
    "broken",
    [
        # The first 500 bytes of a valid export: a download cut short.
        CHATGPT[:500],
        # Its first MiB is a ChatGPT export; read in full, it is not JSON.
        CHATGPT.rstrip()[:-1] + b" " * 2_000_000 + b"oops",
        _zip({"conversations.json": CHATGPT[:500]}),
        JSONL * 3 + JSONL[: len(JSONL) // 2],
    ],
)
def test_the_web_request_refuses_a_file_cut_short_and_stores_nothing(api, owner, broken):
    response = api.post("/api/imports/", {"file": SimpleUploadedFile("export.json", broken)}, format="multipart")
    assert response.status_code == 400, response.content
    assert CUT_SHORT in response.json()["error"]["message"]
    assert (ImportJob.objects.count(), ImportUpload.objects.count()) == (0, 0)


def test_the_syntax_pass_stops_at_the_nesting_limit_of_the_parse(api, owner):
    # A small zip of brackets unpacks to deep nesting; the pass refuses it where the parse would.
    nested = b"[" * 200_000
    response = api.post(
        "/api/imports/", {"file": SimpleUploadedFile("e.zip", _zip({"conversations.json": nested}))}, format="multipart"
    )
    assert (response.status_code, response.json()["error"]["message"]) == (
        400,
        f"The file nests deeper than {stream.MAX_DEPTH} levels.",
    )


def test_the_syntax_pass_reads_the_whole_file_in_bounded_memory():
    data = bloated_chatgpt(conversations=60, messages=10, metadata=300)
    whole = data.rstrip()[:-1]  # the last bracket gone: only the end of the file shows it
    peak, message = peak_bytes(lambda: refusal(sniff_file, whole))
    assert message == CUT_SHORT
    assert peak < 3_000_000


def long_chatgpt(*, conversations: int, messages: int, chars: int) -> bytes:
    """Conversations of long messages, newest first as ChatGPT lists them; conversation c's text is its letter."""
    document = []
    for c in reversed(range(conversations)):
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for m in range(messages):
            node = f"c{c}-m{m}"
            mapping[node] = {
                "id": node,
                "message": {
                    "id": node,
                    "author": {"role": "user" if m % 2 == 0 else "assistant"},
                    "create_time": 1_700_000_000 + c * 3600 + m,
                    "content": {"content_type": "text", "parts": [chr(ord("a") + c % 26) * chars]},
                },
                "parent": parent,
                "children": [],
            }
            parent = node
        document.append(
            {"id": f"conv-{c}", "create_time": 1_700_000_000 + c * 3600, "mapping": mapping, "current_node": parent}
        )
    return json.dumps(document).encode()


def _outline_cases():
    conversations = json.loads(CHATGPT)
    # A bad one (its current node is missing) and a repeated id: the outline reports them as the parse does.
    broken = [*conversations, {"id": "bad", "mapping": {}, "current_node": "gone"}, conversations[0]]
    return [
        (CHATGPT, None),
        (CHATGPT, "chatgpt"),
        (CLAUDE, None),
        (CLAUDE, "claude"),
        (_zip({"conversations.json": CHATGPT}), None),
        (json.dumps(broken).encode(), None),
        (long_chatgpt(conversations=5, messages=4, chars=100), None),
        (b"[]", "chatgpt"),
    ]


@pytest.mark.parametrize(("data", "format"), _outline_cases())
def test_an_outline_keeps_no_messages_and_reads_back_what_the_whole_parse_keeps(data, format):
    whole = parse_file(data, format=format)
    outlined = parse_file(data, format=format, outline=True)
    assert (outlined.format, outlined.conversations, outlined.errors) == (whole.format, [], whole.errors)
    assert [(o.source_id, o.created_at, o.messages, o.chars) for o in outlined.outlines] == [
        (c.source_id, c.created_at, len(c.messages), sum(len(m.text) for m in c.messages)) for c in whole.conversations
    ]
    assert (outlined.conversation_count, outlined.message_count) == (whole.conversation_count, whole.message_count)
    positions = [o.position for o in outlined.outlines]
    back = outlined.read(positions)
    assert sorted(back) == positions
    assert summary(ParseResult(format=whole.format, conversations=[back[p] for p in positions])) == summary(whole)
    assert [c.created_at for c in back.values()] == [c.created_at for c in whole.conversations]
    # A subset is read alone.
    assert list(outlined.read(positions[-1:])) == positions[-1:]


def test_an_outline_is_the_whole_parse_for_jsonl_and_dellms_export():
    export = json.dumps(
        {
            "username": "alice",
            "threads": [{"id": 1}],
            "messages": [{"id": 1, "thread": 1, "seq": 1, "role": "user", "content": "a"}],
            "edges": [],
        }
    ).encode()
    for data in (JSONL, export):
        outlined = parse_file(data, outline=True)
        assert (outlined.outlines, outlined.read) == (None, None)
        assert summary(outlined) == summary(parse_file(data))


def test_the_worker_holds_a_batch_of_the_files_text_not_all_of_it(monkeypatch):
    """The worker's parse kept every message's text, to sort the conversations before landing them:
    100,000 messages of 1,056 characters took it to 316 MB by the end of the parse, 519 MB in all
    (lab/HISTORY.md, memory of an import). Read in outline, it holds one conversation's fields while
    reading, then a batch of conversations (READ_CHARS of text) at a time, in landing order."""
    data = long_chatgpt(conversations=40, messages=10, chars=20_000)
    text = 40 * 10 * 20_000
    whole_peak, _ = peak_bytes(lambda: parse_file(data))
    assert whole_peak > text
    outline_peak, outlined = peak_bytes(lambda: parse_file(data, outline=True))
    # The fields of the conversation being read (200,000 characters), built and parsed, then dropped.
    assert outline_peak < 3 * 200_000
    monkeypatch.setattr("chat.imports.history.READ_CHARS", 1_000_000)
    reads = []
    read = outlined.read
    monkeypatch.setattr(outlined, "read", lambda positions: reads.append(sorted(positions)) or read(positions))

    read_peak, order = peak_bytes(lambda: [c.source_id for c in _conversations(outlined)])
    # Oldest first, as the whole parse lands them; five conversations (1 M characters) a pass.
    assert order == [f"conv-{c}" for c in range(40)]
    assert reads == [sorted(range(39 - c, 39 - c - 5, -1)) for c in range(0, 40, 5)]
    assert read_peak < text // 4


def test_a_conversation_over_its_text_budget_is_refused_whole_and_never_built_whole():
    """One conversation may be the whole file (127 M characters in 2,000 messages fit every other
    limit), and a conversation is held whole while it is read and while it lands: 1 GB in the worker.
    Its text is built up to `max_conversation_chars`, the rest empty, and it is refused by name;
    the others land. Strings read past unbuilt (ChatGPT's metadata) do not count."""
    big = json.loads(long_chatgpt(conversations=1, messages=200, chars=50_000))[0] | {"id": "huge"}
    small = json.loads(long_chatgpt(conversations=2, messages=4, chars=1_000))
    for node in small[0]["mapping"].values():
        node["metadata_blob"] = "x" * 200_000
    data = json.dumps([small[0], big, small[1]]).encode()
    limits = Limits(max_conversation_chars=1_000_000)
    for outline in (False, True):
        peak, result = peak_bytes(lambda outline=outline: parse_file(data, limits=limits, outline=outline))
        assert [e.as_dict() for e in result.errors] == [
            {"conversation": "huge", "field": "messages", "message": "has more than 1000000 characters of text"}
        ]
        landed = result.outlines if outline else result.conversations
        assert [c.source_id for c in landed] == ["conv-1", "conv-0"]
        # Not the 10 M characters of the huge one.
        assert peak < 3 * 1_000_000
    # The setting is the import's limit.
    assert import_limits().max_conversation_chars == settings.DELLM_IMPORT_MAX_CONVERSATION_CHARS


def _longest_string(data: bytes) -> int:
    """The reference: a byte at a time, the longest run between a string's quotes (escapes included)."""
    longest = length = 0
    inside = escaped = False
    for byte in data:
        if not inside:
            if byte == 0x22:
                inside, length = True, 0
        elif escaped:
            escaped, length = False, length + 1
        elif byte == 0x5C:
            escaped, length = True, length + 1
        elif byte == 0x22:
            inside, longest = False, max(longest, length)
        else:
            length += 1
    return max(longest, length) if inside else longest


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\\n\u00e9\U0001f389', max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='k"\\', max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings_hypothesis(max_examples=300, deadline=None)
@given(value=_json_values, ascii=st.booleans(), cuts=st.lists(st.integers(min_value=1, max_value=9), max_size=40))
def test_the_string_cap_finds_the_longest_string_as_a_byte_at_a_time_reading_does(value, ascii, cuts):
    data = json.dumps(value, ensure_ascii=ascii).encode()
    chunks, at = [], 0
    for cut in cuts:
        chunks.append(data[at : at + cut])
        at += cut
    chunks.append(data[at:])
    longest = _longest_string(data)
    assert b"".join(strings_capped(chunks, longest)) == data
    if longest:
        with pytest.raises(ImportFormatError, match=f"longer than {longest - 1} bytes"):
            list(strings_capped(chunks, longest - 1))


def test_a_file_with_a_string_longer_than_the_cap_is_refused_before_it_is_built(monkeypatch):
    """yajl holds a string whole before ijson builds it, in a skipped field too: one string as long as
    the unpacked file cost several times the file. The file is refused once a string passes the cap."""
    monkeypatch.setattr(stream, "MAX_STRING_BYTES", 1_000_000)
    conversation = json.loads(long_chatgpt(conversations=1, messages=2, chars=10))[0]
    conversation["mapping"]["root"]["metadata"] = {"blob": "x" * 5_000_000}
    data = json.dumps([conversation]).encode()
    peak, message = peak_bytes(lambda: refusal(parse_file, data))
    assert message == "The file has a string longer than 1000000 bytes."
    assert peak < 2_000_000
    # At the cap it is read.
    monkeypatch.setattr(stream, "MAX_STRING_BYTES", 5_000_000)
    assert parse_file(data).message_count == 2


def test_a_job_reads_its_conversations_back_a_pass_at_a_time_and_lands_them_oldest_first(
    owner, monkeypatch, django_capture_on_commit_callbacks
):
    import chat.imports.formats

    passes = []
    read_list = chat.imports.formats._read_list
    monkeypatch.setattr(
        chat.imports.formats, "_read_list", lambda *args: passes.append(sorted(args[-1])) or read_list(*args)
    )
    fetched = []
    monkeypatch.setattr(
        "chat.imports.jobs.upload_open", lambda job_id: fetched.append(job_id) or upload_open(job_id=job_id)
    )
    # Two messages a pass: one conversation each.
    monkeypatch.setattr("chat.imports.history.READ_MESSAGES", 2)
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(owner=owner, data=long_chatgpt(conversations=3, messages=2, chars=10))
    job.refresh_from_db()
    assert (job.status, job.conversations_total, job.messages_total, job.messages_imported) == ("done", 3, 6, 6)
    # The file lists the newest first: positions 2, 1, 0 land in that order.
    assert passes == [[2], [1], [0]]
    # The upload is opened for the outline, then again for each pass.
    assert fetched == [job.pk] * 4
    assert list(Message.objects.filter(owner=owner).order_by("seq").values_list("seq", "source_id")) == [
        (1, "c0-m0"),
        (2, "c0-m1"),
        (3, "c1-m0"),
        (4, "c1-m1"),
        (5, "c2-m0"),
        (6, "c2-m1"),
    ]


def test_an_upload_gone_between_passes_fails_the_job_and_keeps_what_landed(
    owner, monkeypatch, django_capture_on_commit_callbacks
):
    fetched = []

    def open_until_swept(job_id):
        fetched.append(job_id)
        # The outline and the first pass find it; then the sweep has deleted it.
        return upload_open(job_id=job_id) if len(fetched) <= 2 else None

    monkeypatch.setattr("chat.imports.jobs.upload_open", open_until_swept)
    # A conversation a pass, and each lands (and is embedded) before the next pass.
    monkeypatch.setattr("chat.imports.history.READ_MESSAGES", 2)
    monkeypatch.setattr("chat.imports.history.EMBED_BATCH", 2)
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(owner=owner, data=long_chatgpt(conversations=3, messages=2, chars=10))
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", "The uploaded file is gone; upload it again.")
    assert list(Message.objects.filter(owner=owner).order_by("seq").values_list("source_id", flat=True)) == [
        "c0-m0",
        "c0-m1",
    ]


def test_an_upload_deleted_while_it_is_read_fails_the_job_and_keeps_what_landed(
    owner, monkeypatch, django_capture_on_commit_callbacks
):
    """Read a block at a time, the worker finds a purge's or a sweep's delete at its next block."""
    monkeypatch.setattr(uploads, "BLOCK", 256)
    monkeypatch.setattr("chat.imports.history.READ_MESSAGES", 2)
    monkeypatch.setattr("chat.imports.history.EMBED_BATCH", 2)
    real = transcripts_store

    def store_then_sweep(**kwargs):
        stored = real(**kwargs)
        ImportUpload.objects.all().delete()
        return stored

    monkeypatch.setattr("chat.imports.history.transcripts_store", store_then_sweep)
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(owner=owner, data=long_chatgpt(conversations=3, messages=2, chars=2_000))
    job.refresh_from_db()
    assert (job.status, job.error, job.messages_imported) == (
        "failed",
        "The uploaded file is gone; upload it again.",
        2,
    )
    assert Message.objects.filter(owner=owner).count() == 2


def test_the_worker_reads_an_upload_a_block_at_a_time(owner):
    """Fetched whole, a 50 MB upload was the bytes and libpq's copy of them at once, for each pass."""
    data = bytes(range(256)) * (8 * 2**20 // 256)
    job = ImportJob.objects.create(owner=owner)
    upload_store(job_id=job.pk, data=data)
    storage = ImportUpload.objects.raw(
        "SELECT job_id, attstorage FROM chat_importupload, pg_attribute "
        "WHERE attrelid = 'chat_importupload'::regclass AND attname = 'data' LIMIT 1"
    )
    assert [row.attstorage for row in storage] == ["e"]
    upload = upload_open(job_id=job.pk)
    assert upload.seek(0, 2) == len(data)
    upload.seek(0)
    read, pieces = peak_bytes(
        lambda: [hashlib.sha256(piece).digest() for piece in iter(lambda: upload.read(16_384), b"")]
    )
    assert pieces == [hashlib.sha256(data[at : at + 16_384]).digest() for at in range(0, len(data), 16_384)]
    assert read < 3 * uploads.BLOCK
    upload.seek(len(data) - 10)
    assert upload.read() == data[-10:]
    assert upload_open(job_id=job.pk + 1) is None


def test_storing_an_upload_costs_its_bytes_once_not_a_multiple_of_them_as_hex(owner):
    """The web process once reached 529 MB on a 47 MB upload: through the ORM, Django's client-side
    binding spelt the bytes out as a hex literal inside the query. Checked by hand (a scratch test
    timing each variant on this 20 MiB file with `peak_bytes`): `upload_store` as it is traces 1.0x
    the file (psycopg's one copy for libpq); written as the ORM's
    `ImportUpload.objects.create(job_id=job_id, data=data)`, which it replaced, 6.0x; sending
    `data.hex()` to `decode(%s, 'hex')`, 4.0x. Both fail here. The read side is checked for its
    round trip (its memory: `test_the_worker_reads_an_upload_a_block_at_a_time`)."""
    data = bytes(range(256)) * (20 * 2**20 // 256)
    job = ImportJob.objects.create(owner=owner)
    stored, _ = peak_bytes(lambda: upload_store(job_id=job.pk, data=data))
    assert stored < len(data) * 3 // 2
    assert upload_open(job_id=job.pk).read() == data


def test_job_errors_are_capped_in_number_and_length(owner, django_capture_on_commit_callbacks):
    long_id = "z" * 150
    gone = "g" * 5_000
    document = [{"id": f"{long_id}{i:03}", "mapping": {}, "current_node": gone} for i in range(130)]
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(owner=owner, data=json.dumps(document).encode())
    job.refresh_from_db()
    assert (job.status, job.conversations_failed, len(job.errors)) == ("done", 130, MAX_ERRORS + 1)
    assert job.errors[0] == {
        "conversation": f"{long_id}000",
        "field": "mapping." + "g" * 191 + "\u2026",
        "message": "is referenced as a parent but missing",
    }
    assert job.errors[-1] == {"conversation": None, "field": "errors", "message": "and 30 more"}


def test_error_values_from_the_file_are_clipped():
    capped = errors_capped([{"conversation": "c" * 1_000, "field": "f" * 1_000, "message": "m"}])
    assert capped == [{"conversation": "c" * 199 + "\u2026", "field": "f" * 199 + "\u2026", "message": "m"}]


def test_the_pure_python_backend_reads_the_same(monkeypatch):
    """ijson's wheels carry yajl2_c; where one does not, its Python backend gives the same results."""
    import ijson

    from chat.imports.formats import stream

    assert stream.BACKEND.backend_name == "yajl2_c"
    files = [CHATGPT, CLAUDE, JSONL, bloated_chatgpt(conversations=2, messages=3, metadata=5)]
    expected = [summary(parse_file(data)) for data in files]
    monkeypatch.setattr(stream, "BACKEND", ijson.get_backend("python"))
    assert [summary(parse_file(data)) for data in files] == expected
    with pytest.raises(ImportFormatError) as caught:
        parse_file(b"[" * 100_000)
    assert caught.value.message == "The file nests deeper than 64 levels."
