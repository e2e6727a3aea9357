"""Keep import uploads uncompressed in TOAST (STORAGE EXTERNAL), so that the worker reads one in blocks.

`substring` of a compressed value decompresses it from its start, so reading
a 50 MB upload a block at a time (chat.imports.uploads.upload_open) would cost
the square of its size; uncompressed, each block reads only its own chunks.
An upload waits only until its job ends. Applies to rows stored from now on.
"""

from django.db import migrations

SQL = "ALTER TABLE chat_importupload ALTER COLUMN data SET STORAGE {}"


class Migration(migrations.Migration):
    dependencies = [("chat", "0015_partition_by_owner")]

    operations = [migrations.RunSQL(SQL.format("EXTERNAL"), SQL.format("EXTENDED"))]
