"""The registry of claims (``claims.yaml`` beside this module): every verdict a chapter
decides, declared before its result, with what kind of statement it tests, how, on which
resampling unit, and the protocol choices it rests on.

A chapter cannot save a verdict the registry does not hold, or hold under another section
(:func:`nearid.book.results.save` checks), and the summary page reads kinds, units and minimum
numbers from here. When a claim's test or protocol changes, its earlier version moves to the
entry's ``history`` with the verdict it gave, so the record of what was decided when is the
file's git history.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from nearid.verdicts import TESTS  # the tests a verdict can be decided by

REGISTRY = Path(__file__).with_name("claims.yaml")
KINDS = {
    "paper_claim": "claims the paper makes in words",
    "paper_number": "orderings of numbers in the paper's tables",
    "paper_tie": "differences the paper prints as 0 (shown, not counted as claims of the paper)",
    "paper_aggregate": "the paper's aggregated rows: means of rows counted on their own (shown, not counted twice)",
    "method_check": "checks of our method (the paper makes no such claim)",
    "hypothesis": "our own hypotheses, beyond the paper",
}
COUNTED_KINDS = ("paper_claim", "paper_number")  # what the summary's headline counts
RETRAINING = ("resampled", "not resampled", "none")
POWER_FLOOR = 3  # the fewest units a power calculation may set: a t interval over 2 has one degree of freedom


@dataclass(frozen=True)
class Claim:
    """One entry of the registry (see the header of ``claims.yaml`` for every field)."""

    id: str
    chapter: str
    section: str
    kind: str
    test: str
    margin: float
    unit: str
    min_n: int
    retraining: str
    min_trainings: int | None = None
    power: dict | None = None
    paper: dict | None = None
    protocol: tuple[str, ...] = ()
    note: str | None = None
    declared: str | None = None
    first_result: str | None = None
    history: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def counts_as_paper_claim(self) -> bool:
        return self.kind in COUNTED_KINDS

    @property
    def declared_before_result(self) -> bool | None:
        """Whether the entry entered the registry before its first recorded result (None: no
        result recorded yet, so it is being declared before it). The registry was created
        after the book's first results: the entries of that day say False."""
        if not self.first_result:
            return None
        return _stamp(self.declared) < _stamp(self.first_result)


def _stamp(text: str) -> datetime:
    """ "2b7c2ea, 2026-12-02 06:49 UTC" -> its time."""
    m = re.search(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC$", text)
    if not m:
        raise ValueError(f"a registry stamp reads 'commit, YYYY-MM-DD HH:MM UTC', got {text!r}")
    return datetime.strptime(m[1], "%Y-%m-%d %H:%M")


def _entry(raw: dict, where: str) -> Claim:
    known = set(Claim.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    missing = sorted(k for k in ("id", "chapter", "section", "kind", "test", "margin", "unit", "min_n", "retraining")
                     if k not in raw)
    if unknown or missing:
        raise ValueError(f"{where}: " + "; ".join(
            ([f"unknown fields {unknown}"] if unknown else []) + ([f"missing fields {missing}"] if missing else [])))
    for name, allowed in (("kind", KINDS), ("test", TESTS), ("retraining", RETRAINING)):
        if raw[name] not in allowed:
            raise ValueError(f"{where}: {name} {raw[name]!r}; valid: {', '.join(allowed)}")
    paper_kinds = ("paper_claim", "paper_number", "paper_tie", "paper_aggregate")
    if raw["kind"] in paper_kinds and not (raw.get("paper") or {}).get("where"):
        raise ValueError(f"{where}: a {raw['kind']} names where the paper says it (paper.where)")
    def lines(items, what: str) -> None:  # "- key: value" in YAML is a mapping, not a line of text
        bad = [item for item in items or () if not isinstance(item, str)]
        if bad:
            raise ValueError(f"{where}: {what} holds {bad[0]!r}, not a line of text (quote a line with ': ' in it)")

    lines(raw.get("protocol"), "protocol")
    for j, old in enumerate(raw.get("history") or []):
        lacking = sorted({"until", "protocol", "verdict"} - set(old or {}))
        if lacking:
            raise ValueError(f"{where}: history entry {j + 1} lacks {lacking} (the commit that changed it, "
                             "the protocol then, the verdict it gave)")
        lines(old["protocol"], f"history entry {j + 1}'s protocol")
    if not raw.get("declared"):
        raise ValueError(f"{where}: declared is missing (the commit that adds the entry, and its time: "
                         "'commit, YYYY-MM-DD HH:MM UTC'; 'this commit, ...' until it has a hash)")
    for stamp in ("declared", "first_result"):
        if raw.get(stamp):
            _stamp(str(raw[stamp]))  # refuses a malformed one, naming it
    _check_power(raw, where)
    if raw["retraining"] == "not resampled" and not raw.get("min_trainings"):
        raise ValueError(f"{where}: a verdict on one training declares min_trainings (the target)")
    return Claim(**{**raw, "protocol": tuple(raw.get("protocol") or ()), "history": tuple(raw.get("history") or ()),
                    "margin": float(raw["margin"]), "min_n": int(raw["min_n"])})


def _check_power(raw: dict, where: str) -> None:
    """A ``power`` field is either the calculation behind ``min_n`` (pilot, method, sd, effect,
    n; ``min_n`` = max(n, :data:`POWER_FLOOR`)) or ``{none: why}``; only counted claims carry one."""
    power = raw.get("power")
    if power is None:
        return
    if raw["kind"] not in COUNTED_KINDS:
        raise ValueError(f"{where}: only the claims the headline counts carry a power calculation")
    if set(power) == {"none"}:
        return
    lacking = sorted({"pilot", "method", "sd", "effect", "n"} - set(power))
    if lacking:
        raise ValueError(f"{where}: power lacks {lacking} (or reads {{none: why}})")
    if int(raw["min_n"]) != max(int(power["n"]), POWER_FLOOR):
        raise ValueError(f"{where}: min_n {raw['min_n']} is not the power calculation's "
                         f"{max(int(power['n']), POWER_FLOOR)} (its n {power['n']}, at least {POWER_FLOOR})")


SECTION_FIELDS = ("chapter", "unit", "retraining", "min_trainings", "protocol")
"""What a section of the registry may state once for its entries (``sections:``): how they are
computed and resampled. What each claim decides (kind, test, margin), its minimum n and power,
its paper reference and its dates stay in the entry, so a new claim cannot inherit them."""


def _section_defaults(doc: dict, name: str) -> dict[str, dict]:
    """``sections: {section: {field: value}}``, checked: only :data:`SECTION_FIELDS`, and only
    sections that some entry names (a misspelt section would otherwise apply to nothing)."""
    sections = doc.get("sections") or {}
    if not isinstance(sections, dict) or not all(isinstance(f, dict) for f in sections.values()):
        raise ValueError(f"{name}: sections maps each section's name to its shared fields "
                         "(section: {field: value})")
    used = {raw.get("section") for raw in doc.get("claims") or []}
    for section, fields in sections.items():
        if section not in used:
            raise ValueError(f"{name}: sections.{section} names a section no claim is in")
        bad = sorted(set(fields) - set(SECTION_FIELDS))
        if bad:
            raise ValueError(f"{name}: sections.{section} may state {', '.join(SECTION_FIELDS)} "
                             f"for its claims, not {bad}")
    return {section: dict(fields) for section, fields in sections.items()}


def load(path: Path = REGISTRY) -> dict[str, Claim]:
    """{claim id: Claim}; ValueError naming the entry on a malformed or repeated one. An entry
    takes its section's shared fields (``sections:``) where it does not state its own."""
    doc = yaml.safe_load(Path(path).read_text()) or {}
    defaults = _section_defaults(doc, Path(path).name)
    out: dict[str, Claim] = {}
    for i, raw in enumerate(doc.get("claims") or []):
        where = f"{Path(path).name}, entry {i + 1} ({raw.get('id', '?')})"
        entry = _entry({**defaults.get(raw.get("section"), {}), **raw}, where)
        if entry.id in out:
            raise ValueError(f"{where}: the id {entry.id!r} is declared twice")
        out[entry.id] = entry
    return out


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Claim]:
    """The package's registry, read once per process."""
    return load()


def history_rows() -> list[dict]:
    """Every earlier version of every claim, for the summary's appendix: one row each, with
    the claim's current protocol beside the one it replaced."""
    return [{"claim_id": c.id, "chapter": c.chapter, "until": old["until"],
             "protocol_then": "; ".join(old["protocol"]), "verdict_then": old["verdict"],
             "protocol_now": "; ".join(c.protocol)}
            for c in registry().values() for old in c.history]
