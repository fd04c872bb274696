"""Data sources. Everything is provisioned from installed packages or generated: nothing is
downloaded at run time."""

import os
from collections.abc import Mapping
from pathlib import Path

ENV_DATA = "NEARID_DATA"


def data_root() -> Path:
    """The data folder that ``nearid data`` provisions, whatever the working directory.

    ``$NEARID_DATA`` if set; else ``data/`` of the checkout this package runs from (the
    folder above ``lib/`` holding ``pyproject.toml``), so a chapter run by papermill from
    another folder still finds MNIST; else ``data`` under the working directory (an installed
    wheel). A ``$NEARID_DATA`` that names something other than a folder is refused here,
    naming the variable (ValueError), rather than reported later as a missing data file."""
    given = os.environ.get(ENV_DATA)
    if given:
        problem = environment_problem({ENV_DATA: given})
        if problem:
            raise ValueError(problem)
        return Path(given)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "lib" / "nearid").is_dir():
        return checkout / "data"
    return Path("data")


def environment_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """One line naming ``$NEARID_DATA`` and what it accepts when it is set to a path that
    cannot be the data folder (a file, a dangling link, under a file); None when it is fine.
    A folder that does not exist yet is fine: ``nearid data`` makes it."""
    env = os.environ if environ is None else environ
    given = env.get(ENV_DATA, "")
    if not given:
        return None
    from nearid.cachefiles import folder_problem

    why = folder_problem(given)
    if why is None or "cannot write" in why:
        return None  # a read-only data folder is fine to read: `nearid data` says so when it writes
    return (f"${ENV_DATA} is {given!r}, which {why}; allowed: the data folder `nearid data` provisions "
            f"(made if missing), or unset (data/ of the checkout)")
