"""Chapter 07, the summary: it has no parameters and reads every other chapter's results."""

from __future__ import annotations

PROFILES = {"smoke": {}, "quick": {}, "full": {}}
CONSTRAINTS: dict = {}
RULES: list = []
# The runner runs these chapters first and re-executes the summary when one of their
# results files changes.
READS = ("01_definitions", "02_isometric_dgp", "03_bilipschitz", "04_alignment", "05_disentanglement",
         "06_cell_microscopy")
# ... and only these entries of their results count: a chapter re-executed with the same
# verdicts (its wall-clock fields differ) leaves the summary as it is.
READ_KEYS = ("profile", "verdicts", "paper_comparison")
