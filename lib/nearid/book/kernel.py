"""The chapter kernel: ipykernel, started so that it dies with the process that runs it.

jupyter_client starts a kernel in a session of its own, so a Ctrl-C in the terminal never
reaches it, and ipykernel only polls once a second for a parent that is gone (measured here:
after a SIGKILL of ``nearid run`` its kernel lived on for 8 s, still computing). The runner
launches ``python -m nearid.book.kernel -f CONNECTION_FILE`` instead of
``ipykernel_launcher``: on Linux the kernel asks the kernel of the operating system for a
SIGKILL when its parent exits (``prctl(PR_SET_PDEATHSIG)``), whatever the way it exits;
elsewhere ipykernel's own parent polling remains.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent exits; False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig)) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> bool:
    """Ask for SIGKILL when the parent exits; exit at once if it is already gone.

    Returns whether the request was registered (Linux only).
    """
    registered = set_parent_death_signal()
    parent = int(os.environ.get("JPY_PARENT_PID", "0") or 0)
    if parent and os.getppid() != parent:  # the runner died before prctl: nobody to serve
        os._exit(1)
    return registered


def main() -> None:
    # As ipykernel_launcher: keep the working folder off sys.path while ipykernel loads.
    if sys.path and (sys.path[0] == "" or Path(sys.path[0]) == Path.cwd()):
        del sys.path[0]
    die_with_parent()
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
