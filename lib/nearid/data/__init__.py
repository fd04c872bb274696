"""Data sources. Everything is provisioned from installed packages or generated: nothing is
downloaded at run time."""

import os
from pathlib import Path

ENV_DATA = "NEARID_DATA"


def data_root() -> Path:
    """The data folder that ``nearid data`` provisions, whatever the working directory.

    ``$NEARID_DATA`` if set; else ``data/`` of the checkout this package runs from (the
    folder above ``lib/`` holding ``pyproject.toml``), so a chapter run by papermill from
    another folder still finds MNIST; else ``data`` under the working directory (an installed
    wheel)."""
    given = os.environ.get(ENV_DATA)
    if given:
        return Path(given)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "lib" / "nearid").is_dir():
        return checkout / "data"
    return Path("data")

