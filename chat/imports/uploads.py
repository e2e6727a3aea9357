"""An import's uploaded file in and out of `chat.ImportUpload`, as binary.

Through the ORM a 50 MB upload cost the web process about 430 MB and the
worker about 290 MB over their baseline (`make bench`, part import_memory):
Django's psycopg cursors bind on the client, so the insert spelt the bytes
out as a hex literal inside the query, and the read came back as hex text to
decode. The insert sends the bytes in PostgreSQL's binary format, once. The
worker never fetches them whole: `upload_open` is a seekable file over the
stored value, read a block at a time (`substring`), which the column keeps
uncompressed (migration 0016: STORAGE EXTERNAL) so a block costs its own
bytes, not a decompression from the start of the file.
"""

from __future__ import annotations

import io

import psycopg
from django.db import connection

from chat.models import ImportUpload

UPLOADS = ImportUpload._meta.db_table
# What one read of the stored upload fetches, and the worker holds of it.
BLOCK = 1024 * 1024


class UploadGone(Exception):
    """The upload was deleted while its job read it (a purge, or the sweep of a stuck job)."""


def upload_store(*, job_id: int, data: bytes) -> None:
    """Store the upload of a job just created (in the caller's transaction)."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(f"INSERT INTO {UPLOADS} (job_id, data) VALUES (%s, %b)", [job_id, data])


class _StoredUpload(io.RawIOBase):
    """The stored value of one upload as a raw binary file: each read is one `substring` query."""

    def __init__(self, job_id: int, size: int) -> None:
        self.job_id, self.size, self.position = job_id, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(base + offset, 0)
        return self.position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self.size - self.position)
        if wanted <= 0:
            return 0
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(
                f"SELECT substring(data FROM %s FOR %s) FROM {UPLOADS} WHERE job_id = %s",
                [self.position + 1, wanted, self.job_id],
                binary=True,
            )
            row = cursor.fetchone()
        if row is None:
            raise UploadGone(self.job_id)
        block = row[0]
        buffer[: len(block)] = block
        self.position += len(block)
        return len(block)


def upload_open(*, job_id: int) -> io.BufferedReader | None:
    """The job's upload as a seekable binary file read BLOCK bytes at a time, or None if it is gone.

    A read after the upload was deleted raises UploadGone.
    """
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(f"SELECT octet_length(data) FROM {UPLOADS} WHERE job_id = %s", [job_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return io.BufferedReader(_StoredUpload(job_id, row[0]), buffer_size=BLOCK)
