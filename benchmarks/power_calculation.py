"""Each counted claim's minimum n from a power calculation on a pilot run (issue 35, item 5).

For every claim the headline counts, the pilot's interval gives the spread of one unit (a
seed, a replicate, a bootstrap cluster: :func:`nearid.verdicts.unit_spread`), and
:func:`nearid.verdicts.units_for_spread` the number of units that detects the paper's own
difference beyond the claim's bound with 80% power (an equivalence claim: that keeps its
interval inside the margin when the truth is the claimed value). The registry's ``min_n``
becomes that number, at least :data:`nearid.claims.POWER_FLOOR`, and the entry keeps the
calculation (``power``: pilot, method, spread, effect, n) so that a test can redo it. A
claim with no number to power against (the paper states it in words, or the pilot's
interval is unbounded) keeps its design floor and says why. For Table 1's efficiencies
(Fieller intervals for a ratio of means) the spread read off the interval is a rough
approximation (:func:`nearid.verdicts.units_for_spread`): their minimums overstate the need.

The pilot is a run's reference results: for the next run the minimum is declared before its
result; for the pilot itself it is read off its own spread, which the summary says.

    python benchmarks/power_calculation.py                     # the table, nothing written
    python benchmarks/power_calculation.py --pilot-name "quick reference, fdc75cf" --write
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

from nearid import claims
from nearid.book.results import CLAIM_BLOCKS
from nearid.verdicts import unit_spread, units_for_spread

ROOT = Path(__file__).resolve().parents[1]
MOST = 10_000  # a need beyond this is recorded as none, not as a minimum nobody could meet


def pilot_records(folder: Path) -> dict[str, dict]:
    """{claim id: its record} over every chapter JSON in ``folder``."""
    out: dict[str, dict] = {}
    for path in sorted(folder.glob("0[1-6]_*.json")):
        doc = json.loads(path.read_text())
        for block in CLAIM_BLOCKS:
            out.update(doc.get(block) or {})
    return out


def calculation(entry: claims.Claim, rec: dict | None, pilot: str) -> dict:
    """The ``power`` field of one counted claim: the calculation, or ``{"none": why}``."""
    if rec is None:
        return {"none": "no result in the pilot"}
    paper = rec.get("paper")
    equivalence = entry.test == "equivalence"
    if not equivalence and (paper is None or isinstance(paper, str) or not math.isfinite(float(paper))):
        return {"none": "the paper states this claim in words, with no number: no effect to power against; "
                        "min_n is the design floor"}
    low, high = rec.get("low"), rec.get("high")
    sd = unit_spread(low, high, rec.get("n"), rec.get("method"))
    if not math.isfinite(sd):
        finite = low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
        why = "has no width" if finite else "is unbounded"
        return {"none": f"the pilot's interval {why}: no spread to power from; min_n is the design floor"}
    sd = float(f"{sd:.4g}")
    if equivalence:
        effect = entry.margin  # the truth on the claimed value, both ends inside the margin
    else:
        bound = -entry.margin if entry.test == "non_inferiority" else entry.margin
        effect = float(f"{float(paper) - bound:.4g}")
    n = units_for_spread(sd, effect, rec.get("method"), equivalence=equivalence, most=MOST)
    if n > MOST:
        return {"none": f"more than {MOST:,} units would be needed at the pilot's spread: min_n is the design floor"}
    return {"pilot": pilot, "method": rec.get("method"), "sd": sd, "effect": effect, "n": int(n)}


def rewrite(text: str, plans: dict[str, dict]) -> str:
    """``claims.yaml`` with each planned entry's ``min_n`` and ``power`` lines replaced (the
    rest of the file, comments and history included, untouched)."""
    blocks = re.split(r"(?m)^(?=- id: )", text)
    out = []
    for block in blocks:
        m = re.match(r"- id: (\S+)", block)
        if m and m[1] in plans:
            plan, min_n = plans[m[1]]
            block = re.sub(r"(?m)^  power: .*\n", "", block)
            line = "  power: " + json.dumps(plan, separators=(", ", ": ")) + "\n"
            block, k = re.subn(r"(?m)^  min_n: \d+\n", f"  min_n: {min_n}\n" + line, block, count=1)
            if k != 1:
                raise ValueError(f"{m[1]}: no min_n line to rewrite")
        out.append(block)
    return "".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pilot", type=Path, default=ROOT / "book" / "reference" / "quick")
    ap.add_argument("--pilot-name", default="quick reference")
    ap.add_argument("--write", action="store_true", help="rewrite lib/nearid/claims.yaml")
    args = ap.parse_args()
    registry = claims.registry()
    records = pilot_records(args.pilot)
    plans = {}
    print("| claim | n in the pilot | spread of one unit | effect | power n | min_n (was) |")
    print("| --- | --: | --: | --: | --: | --: |")
    for cid, entry in registry.items():
        if not entry.counts_as_paper_claim:
            continue
        plan = calculation(entry, records.get(cid), args.pilot_name)
        min_n = max(claims.POWER_FLOOR, plan["n"]) if "n" in plan else entry.min_n
        plans[cid] = (plan, min_n)
        rec = records.get(cid) or {}
        print(f"| `{cid}` | {rec.get('n', '–')} | {plan.get('sd', '–')} | {plan.get('effect', '–')} | "
              f"{plan.get('n', 'none')} | {min_n} ({entry.min_n}) |")
    if args.write:
        claims.REGISTRY.write_text(rewrite(claims.REGISTRY.read_text(), plans))
        claims.registry.cache_clear()
        claims.load()  # refuses what it cannot read
        print(f"rewrote {claims.REGISTRY}")


if __name__ == "__main__":
    main()
