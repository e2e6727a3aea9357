"""The bytes of an upload to parse: a file as it is, or one member of an export zip.

Only the member named exactly is read (no extraction to disk, so no path
traversal); its declared size is checked before anything is unpacked, and
its actual decompressed size is counted while reading, because a zip bomb
can lie in its headers. Nothing is held whole: a `Payload` is opened afresh
for each pass and read in chunks (chat/imports/formats/stream.py), from the
upload's bytes or file and through the zip's decompressor.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

from chat.imports.formats.base import ImportFormatError
from chat.imports.formats.stream import checked_chunks

ZIP_MAGIC = b"PK\x03\x04"
# The central directory a zip may have: about 70,000 entries, far more than an
# export's files (ChatGPT's: the JSON, the HTML page, uploaded files, images).
MAX_DIRECTORY_BYTES = 8 * 1024 * 1024
# RuntimeError: a member that is encrypted ("password required").
_UNREADABLE = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    NotImplementedError,
    OSError,
    EOFError,
    zlib.error,
    RuntimeError,
)


@dataclass(frozen=True)
class ZipLimits:
    max_member_bytes: int = 200 * 1024 * 1024
    max_total_bytes: int = 1024 * 1024 * 1024


def as_file(data: bytes | IO[bytes]) -> IO[bytes]:
    # BytesIO shares the bytes it is given until written to: no copy.
    return io.BytesIO(data) if isinstance(data, bytes) else data


def is_zip(file: IO[bytes]) -> bool:
    file.seek(0)
    head = file.read(4)
    file.seek(0)
    return head == ZIP_MAGIC


@dataclass(frozen=True)
class Payload:
    """What to parse: the file itself (`member` None) or a member of it as a zip."""

    file: IO[bytes]
    member: zipfile.ZipInfo | None = None
    limit: int | None = None

    @property
    def name(self) -> str:
        return "file" if self.member is None else self.member.filename.rsplit("/", 1)[-1]

    def chunks(self, *, peek: int | None = None) -> Iterator[bytes]:
        """Its bytes in chunks, checked (stream.checked_chunks); the first `peek` bytes only if given."""
        if self.member is None:
            self.file.seek(0)
            yield from checked_chunks(_capped(self.file.read, peek), limit=self.limit, name=self.name, final=not peek)
            return
        try:
            with zipfile.ZipFile(self.file) as archive, archive.open(self.member) as member:
                yield from checked_chunks(_capped(member.read, peek), limit=self.limit, name=self.name, final=not peek)
        except _UNREADABLE:
            raise ImportFormatError(f"{self.name} in the zip cannot be read.", field=self.name) from None


def _capped(read: Callable[[int], bytes], peek: int | None) -> Callable[[int], bytes]:
    if peek is None:
        return read
    left = peek

    def read_some(size: int) -> bytes:
        nonlocal left
        chunk = read(min(size, left)) if left > 0 else b""
        left -= len(chunk)
        return chunk

    return read_some


def zip_member(file: IO[bytes], name: str, limits: ZipLimits) -> Payload:
    """The member `name` of the zip, its declared sizes checked; its real size is counted as it is read."""
    # `ZipFile` builds an object per entry of the central directory: a 50 MB
    # zip of empty entries would be hundreds of megabytes of them. Its size is
    # read first, from the end record (the standard library's own reader, Zip64 aware).
    try:
        end = zipfile._EndRecData(file)  # type: ignore[attr-defined]
    except OSError:
        end = None
    if end is not None and end[zipfile._ECD_SIZE] > MAX_DIRECTORY_BYTES:  # type: ignore[attr-defined]
        raise ImportFormatError("The zip lists too many files.", field="file")
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise ImportFormatError("The zip file is damaged.", field="file") from None
    with archive:
        infos = archive.infolist()
    # The sum of declared sizes bounds what a careless extractor would write;
    # refusing a huge one early is cheap. The member is then read counted.
    if sum(info.file_size for info in infos) > limits.max_total_bytes:
        raise ImportFormatError("The zip unpacks to too much data.", field="file")
    matches = [info for info in infos if info.filename == name or info.filename.endswith("/" + name)]
    if not matches:
        raise ImportFormatError(f"The zip has no {name}.", field=name)
    info = min(matches, key=lambda item: item.filename.count("/"))
    if info.file_size > limits.max_member_bytes:
        raise ImportFormatError(f"{name} is larger than {limits.max_member_bytes} bytes.", field=name)
    return Payload(file=file, member=info, limit=limits.max_member_bytes)
