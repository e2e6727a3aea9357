"""An import's uploaded file in and out of `chat.ImportUpload`, as binary.

Through the ORM a 50 MB upload cost the web process about 430 MB and the
worker about 290 MB over their baseline (`make bench`, part import_memory):
Django's psycopg cursors bind on the client, so the insert spelt the bytes
out as a hex literal inside the query, and the read came back as hex text to
decode. These send and fetch the bytes in PostgreSQL's binary format, once.
"""

from __future__ import annotations

import psycopg
from django.db import connection

from chat.models import ImportUpload

UPLOADS = ImportUpload._meta.db_table


def upload_store(*, job_id: int, data: bytes) -> None:
    """Store the upload of a job just created (in the caller's transaction)."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(f"INSERT INTO {UPLOADS} (job_id, data) VALUES (%s, %b)", [job_id, data])


def upload_read(*, job_id: int) -> bytes | None:
    """The job's upload, or None if it is gone."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(f"SELECT data FROM {UPLOADS} WHERE job_id = %s", [job_id], binary=True)
        row = cursor.fetchone()
    return None if row is None else bytes(row[0])
