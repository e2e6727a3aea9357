"""The `SECRET_KEY` when none is configured: random, made once, kept in the data directory.

A key published in the repository would let anyone forge sessions and
password-reset links; a key generated per process would sign everyone out at
every restart and differ between web and worker. So the first process to need
one writes it and every later one reads it. The key is written to a private
temporary file first and then hard-linked into place, which fails if the file
exists: concurrent starters all end up with the winner's key, never a torn one.
"""

import os
import secrets
from pathlib import Path

FILE_NAME = "secret_key"


def persistent_secret_key(data_dir: Path) -> str:
    path = data_dir / FILE_NAME
    if not path.exists():
        temporary = data_dir / f".{FILE_NAME}.{os.getpid()}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_urlsafe(50))
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    return path.read_text().strip()
