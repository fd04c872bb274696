"""Chapter 07, the summary: it has no parameters and reads every other chapter's results."""

from __future__ import annotations

PROFILES = {"smoke": {}, "quick": {}, "full": {}}
CONSTRAINTS: dict = {}
RULES: list = []
# The runner runs these chapters first and re-executes the summary when one of their
# results files changes.
READS = ("01_definitions", "02_isometric_dgp", "03_bilipschitz", "04_alignment", "05_disentanglement",
         "06_cell_microscopy")
