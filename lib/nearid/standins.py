"""What stands in for each of the paper's models and datasets: one registry.

Our tables and verdicts name their rows as the paper does ("CheXpert-small -> CheXpert-base",
"Shapes3D"), so a reader can find the paper's number beside ours; what we actually train or
generate in that row's place is said here, once, and every page that shows a paper's name
for one of our results shows this beside it (:func:`labelled`). A subject of chapters 04 and
05's verdicts with no entry fails a test: a new row cannot reach a page unexplained.
"""

from __future__ import annotations

import re

# The paper's name (as nearid.paper prints it) -> what we use in its place, short enough for a
# table cell. Table 1's rows are chapter 04's pairs (nearid.paper.TABLE1_STAND_INS), Table 2's
# datasets chapter 05's procedural renders (nearid.data.procedural), Tables 3-4's model
# chapter 06's MAE on a simulated screen.
STAND_INS = {
    "Pythia-160M-0 -> Pythia-160M-1": "tiny GPT-NeoX, two seeds",
    "MAE-timm -> MAE-original": "small MAE, timm's and ours",
    "CheXpert-small -> CheXpert-base": "MNIST CNNs, two widths",
    "ResNet-18-fc-1 -> ResNet-18-fc-2": "MNIST ResNet-18, two seeds",
    "Shapes3D": "procedural Shapes3D analogue",
    "MPI3D": "procedural MPI3D analogue",
    "Falcor3D": "procedural Falcor3D analogue",
    "Isaac3D": "procedural Isaac3D analogue",
    "OpenPhenom on RxRx3-core": "small MAE on a simulated screen",
}
# Subjects that are ours, not a stand-in for anything of the paper's (a mean over rows).
NOT_STAND_INS = re.compile(r"^(mean|aggregated)\b")


def _short(name: str) -> str:
    return re.split(r"[-\s]", name.strip(), maxsplit=1)[0]


def stand_in(name: str) -> str | None:
    """What stands in for the paper's ``name`` (its full name or its first word, "CheXpert");
    None for a subject of ours ("mean over datasets"). Raises KeyError, naming the registry,
    for a name it does not know."""
    if NOT_STAND_INS.match(name.strip()):
        return None
    if name in STAND_INS:
        return STAND_INS[name]
    by_short = {_short(k): v for k, v in STAND_INS.items()}
    if name in by_short:
        return by_short[name]
    raise KeyError(f"{name!r} has no stand-in in nearid.standins.STAND_INS: say what stands in for it there "
                   f"before a page shows it (known: {', '.join(STAND_INS)})")


def labelled(name: str) -> str:
    """``"CheXpert (stand-in: MNIST CNNs, two widths)"``: the paper's name with what stands in for
    it; any other subject ("mean over datasets", chapter 02's "delta -> 0") unchanged. That
    every subject the paper's tables name is in the registry is a test
    (tests/unit/test_standins.py), so a page never fails for a label."""
    try:
        ours = stand_in(name)
    except KeyError:
        return name
    return name if ours is None else f"{name} (stand-in: {ours})"
