"""Reading one member of an export zip without trusting its headers.

Only the member named exactly is read (no extraction to disk, so no path
traversal); its declared size is checked first and its actual decompressed
size is counted while reading, because a zip bomb can lie in its headers.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from chat.importers.base import ImportFormatError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class ZipLimits:
    max_member_bytes: int = 200 * 1024 * 1024
    max_total_bytes: int = 1024 * 1024 * 1024


def is_zip(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04"


def read_member(data: bytes, name: str, limits: ZipLimits) -> bytes:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
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
        out = bytearray()
        try:
            with archive.open(info) as member:
                while chunk := member.read(_CHUNK):
                    out += chunk
                    if len(out) > limits.max_member_bytes:
                        raise ImportFormatError(f"{name} is larger than {limits.max_member_bytes} bytes.", field=name)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError):
            raise ImportFormatError(f"{name} in the zip cannot be read.", field=name) from None
        return bytes(out)
