"""Uploads larger than FILE_UPLOAD_MAX_MEMORY_SIZE go to a temporary file that has no name.

Django's own TemporaryFileUploadHandler writes them to a *named*
`tmpXXXX.upload` file and removes it when the request ends, so a web process
killed mid-request leaves the plaintext of a chat history on disk for good.
This handler uses `tempfile.TemporaryFile` instead (O_TMPFILE on Linux, or
unlinked at once elsewhere): the file never has a name, and the kernel frees
it when the request closes it or the process dies. Its blocks hold the text
until the filesystem reuses them, as any deleted file's do: put
FILE_UPLOAD_TEMP_DIR (and TMPDIR, for the ASGI request body spool) on tmpfs
or an encrypted volume to bound that (provenance/erasure/registry.py).
"""

import tempfile
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler


class UnnamedUploadedFile(UploadedFile):
    def __init__(
        self,
        name: str | None,
        content_type: str | None,
        size: int,
        charset: str | None,
        content_type_extra: Any = None,
    ) -> None:
        # Closed by the request's end (Django closes every uploaded file), not by a `with` here.
        file = tempfile.TemporaryFile(dir=settings.FILE_UPLOAD_TEMP_DIR)  # noqa: SIM115
        super().__init__(file, name, content_type, size, charset, content_type_extra)


class UnnamedTemporaryFileUploadHandler(FileUploadHandler):
    """TemporaryFileUploadHandler without the name (see the module's docstring)."""

    file: UnnamedUploadedFile

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.file = UnnamedUploadedFile(self.file_name, self.content_type, 0, self.charset, self.content_type_extra)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self.file.write(raw_data)

    def file_complete(self, file_size: int) -> UnnamedUploadedFile:
        self.file.seek(0)
        self.file.size = file_size
        return self.file

    def upload_interrupted(self) -> None:
        if hasattr(self, "file"):
            self.file.close()
