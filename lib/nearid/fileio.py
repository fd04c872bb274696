"""Small file helpers shared by the science and the book: writes that never leave half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write via a temporary file in the same folder, then rename: never a half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; outputs are meant to be read
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one owned by someone else counts): a
    temporary file or lock left by a dead process may be cleaned up, never a living one's."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by another user
        return True
    return True
