"""Chapter 07, the summary: it reads every other chapter's results and has one parameter,
``dry_run``, which it accepts so that the full-shape dry run (``make check-full``) covers it
too: it trains nothing, so there is nothing to cut, and it summarises whatever results sit
beside it (in a dry run, the dry-run results)."""

from __future__ import annotations

from nearid.book.profiles.shared import DRY_RUN

PROFILES = {"smoke": {"dry_run": False}, "quick": {"dry_run": False}, "full": {"dry_run": False}}
CONSTRAINTS: dict = {"dry_run": DRY_RUN}
RULES: list = []
# The runner runs these chapters first and re-executes the summary when one of their
# results files changes.
READS = ("01_definitions", "02_isometric_dgp", "03_bilipschitz", "04_alignment", "05_disentanglement",
         "06_cell_microscopy")
# ... and only these entries of their results count: a chapter re-executed with the same
# verdicts (its wall-clock fields differ) leaves the summary as it is.
READ_KEYS = ("profile", "verdicts", "paper_comparison")
