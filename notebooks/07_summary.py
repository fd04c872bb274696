# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (summary)=
# # Summary: what reproduced
#
# Every chapter tests claims of the paper on its own data and models and decides each one
# from a paired comparison with a 95% interval: a claim **holds** when the whole interval
# lies on the paper's side, **fails** when it lies on the other side, and is
# **inconclusive** when it contains the threshold. This page is computed from the chapters'
# results files when the book is built; nothing on it is typed, so it cannot disagree with
# the chapters. Profile of this build: {glue:text}`profiles`.

# %% tags=["parameters", "remove-cell"]
profile = "quick"
overrides = {}
results_path = None

# %% tags=["remove-cell"]
import nearid  # first: it pins the CPU kernels before numpy and torch load (nearid.kernels)
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from nearid.book import claim_text, plotting, results, scorecard, summary_figures
from nearid.book.profiles import READS, resolve
from nearid.book.results import glue
from nearid.claims import COUNTED_KINDS

P = resolve("07_summary", profile, overrides)
plotting.use_style()
folder = Path(results_path).parent if results_path else Path("book/executed")
# only this profile's results: another profile's numbers are never shown under this one's name
chapter_results, other_profile = scorecard.of_profile(scorecard.load_results(folder, READS["07_summary"]), profile)
claims = scorecard.claims_table(chapter_results)
comparison = scorecard.comparison_table(chapter_results)
counted = scorecard.paper_claims(claims)
counts = scorecard.verdict_counts(counted)
by_kind = scorecard.counts_by_kind(claims)
statements = scorecard.statements(claims)
missing = [k for k, v in chapter_results.items() if v is None]
glue("n_claims", len(counted))
glue("n_statements", int(statements.kind.isin(COUNTED_KINDS).sum()))
glue("n_folded", int((statements.facets.map(len) > 0).sum()))
glue("n_other", len(claims) - len(counted))
glue("profiles", ", ".join(sorted(set(claims.profile))) or "none")
glue("n_one_training", int((counted.retraining == "not resampled").sum()))
glue("n_below_min", int((counted.n < counted.min_n).sum()))
glue("n_unconverged", int((counted.ica_converged == False).sum()))  # noqa: E712 (None: no ICA fit recorded)
for verdict, k in counts.items():
    glue(f"n_{verdict}", k)
counts_fdr = scorecard.verdict_counts(counted, "verdict_fdr")
for verdict, k in counts_fdr.items():
    glue(f"n_{verdict}_fdr", k)
outcomes = scorecard.outcome_counts(counted)
for name, k in outcomes.items():
    glue(f"n_outcome_{name.split()[0]}", k)  # holds, fails, smaller, larger, underpowered, not
glue("n_decided", len(counted) - outcomes["not decided"])
larger = outcomes["larger than the paper's"]
glue("larger_text", f"; {larger} lie wholly above the paper's number yet touch the claim's bound" if larger else "")
glue("n_numbers", len(comparison))
glue("n_directional", len(summary_figures.directional_claims(counted)))
glue("missing", scorecard.missing_text(chapter_results, other_profile, profile))

# %% [markdown]
# ## At a glance
#
# Of the {glue:text}`n_claims` claims of the paper tested here (its claims in words and the
# orderings of its tables' numbers), {glue:text}`n_outcome_not` are **not decided**: they
# rest on a FastICA fit that converged by neither of its routes (scikit-learn's iteration, then
# the stabilised one), and an iterative fit that did not converge is not evidence either way. Of the {glue:text}`n_decided` decided, each at 95% on
# its own, {glue:text}`n_outcome_holds` **hold** and {glue:text}`n_outcome_fails` **fail**;
# of the inconclusive, {glue:text}`n_outcome_smaller` are **smaller than the paper's effect**
# (the interval rules out the difference the paper prints, but not the claim's bound: the
# effect is there or not, and in either case smaller than the paper's) and
# {glue:text}`n_outcome_underpowered` are **underpowered** (the interval holds both the bound
# and the paper's number, or the paper prints none: too few units to tell){glue:text}`larger_text`. Tested together,
# some of so many would hold or fail by chance; with the false discovery rate held at 5%
# across the decided claims (Benjamini–Hochberg), {glue:text}`n_holds_fdr` hold,
# {glue:text}`n_inconclusive_fdr` are inconclusive and {glue:text}`n_fails_fdr` fail. They
# make {glue:text}`n_statements` statements: a statement the paper makes for several model
# pairs or datasets is tested on each, and counted once per pair or dataset; the paper's
# "aggregated" rows, means of rows counted on their own with the same seeds, are shown but
# not counted a second time. The other {glue:text}`n_other` rows are those aggregates,
# differences the paper prints as 0, checks of our method (among them orderings that hold by
# construction, such as rigid above linear for nested families) and our own hypotheses,
# shown but not counted. Chapters without results of this profile when this page was built (a chapter
# executed with another profile is left out, never shown under this one): {glue:text}`missing`.

# %% tags=["remove-input"] mystnb={"image": {"alt": "A grid of coloured tiles, one per claim: rows are chapters 01 to 06, the paper's claims on the left and the rows not counted on the right; green tiles with a tick hold, grey tiles with a question mark are inconclusive, orange tiles with a cross fail, white tiles with a circle are not decided (an unconverged FastICA fit)."}, "figure": {"caption": "Every claim, one tile each, coloured by its verdict. Left: the paper's claims (counted; a white tile with a circle is not decided, because its verdict rests on a FastICA fit that did not converge); right: ties, aggregates, checks of our method and our hypotheses (not counted). The tiles of a statement tested per model pair or per dataset sit side by side; under the tiles, the paper's figure or table; under each chapter, its tally of the paper's claims. The table below names every tile.", "name": "fig-07-claims"}}
fig = summary_figures.plot_claims_map(claims)
plt.show()

# %% tags=["remove-input"]
display(Markdown(scorecard.tallies_markdown(scorecard.chapter_tallies(claims))))

# %% [markdown]
# (summary-claim-by-claim)=
# ## Claim by claim
#
# Each claim of the paper tested here, in the paper's words, under the part of the paper
# that makes it: what we find (our estimate with its 95% interval, rounded as in the tables,
# the paper's number for the same quantity, and n, the units the interval resamples), why we
# read it so, and what result would change our reading. A claim the paper makes for several
# model pairs or datasets is one paragraph with a finding for each, named by the paper's
# row; after "ours" comes what our number measures, on which of our models (small stand-ins
# trained here, or generated data, never the paper's own). Every word that depends on a
# number is computed from the chapters' results when the page is built.

# %% tags=["remove-input"]
display(Markdown(claim_text.claims_markdown(claims)))

# %% [markdown]
# ## The claims
#
# One row per statement, grouped by kind, in the order of the chapters and of the paper's
# figures and tables, each declared in the registry of claims (`lib/nearid/claims.yaml`;
# when, the appendix says). The verdict comes first and links to the section of its
# chapter that decides it, where the protocol, the numbers and our reading of any difference
# from the paper are given (including where our setting differs from the paper's:
# procedural analogues of the disentanglement datasets, a simulated cell screen, small
# models trained on a CPU). A statement tested per model pair or per dataset
# ({glue:text}`n_folded` of them) has one verdict per pair or dataset. "ours" is our estimate
# with its 95% interval, rounded to the decimal the interval's width sets (one below its
# leading digit); "paper" is the paper's number for the same quantity. Under each table, a
# dropdown gives each row's test, minimum detectable effect and number of units.
#
# :::{dropdown} How to read test, MDE and n
# "test" says how the interval is read, as the registry declares: "> 0" (higher: the
# interval above 0), "> −m" (comparable: not below −m, non-inferiority) or "within ±m" (the
# same: inside ±m, equivalence). "MDE" is the smallest true effect the design would detect
# with 80% power, read off the interval: an inconclusive verdict with a large MDE says "too
# few units to tell", one with a small MDE "close to the threshold". "n" counts the units the
# interval resamples; "below" flags fewer than the registry's minimum, and "one training"
# flags an interval over evaluation units of a single trained model, which leaves out the
# variance of retraining ({glue:text}`n_one_training` of the counted claims;
# {glue:text}`n_below_min` below their declared minimum); "FastICA unconverged" flags a
# verdict that rests on a FastICA fit that converged by neither route
# ({glue:text}`n_unconverged` of the counted claims). "BH" is a counted claim's verdict with
# the false discovery rate held at 5% across all counted claims (Benjamini–Hochberg, on the
# p-value its interval implies): a claim that holds or fails only at 95% on its own reads
# inconclusive there.
# :::

# %% tags=["remove-input"]
display(Markdown(scorecard.to_markdown(claims)))

# %% [markdown]
# ## Every number of Tables 1-4, ours against the paper's
#
# {numref}`fig-07-tables` puts each of the {glue:text}`n_numbers` numbers of the paper's
# Tables 1-4 that a chapter measured beside the paper's value, one panel per direction of
# "better": points on the grey diagonal agree, and in the errors' panel a point below it is
# better than the paper's, in the others a point above it. The chapters explain the distance
# from it (smaller models, procedural or simulated data, CPU budgets). The last panel shows
# the {glue:text}`n_directional` claims of the paper that say one number is higher than
# another, our difference against the paper's, by verdict; the claims tested as "the same"
# or "in the paper's range" are in {numref}`fig-07-claims` and the tables above.

# %% tags=["remove-input"] mystnb={"image": {"alt": "Four scatter plots of our numbers against the paper's: Table 1's alignment errors, the scores of Tables 2 to 4, Table 1's ICA efficiency with the paper's range shaded, and the claims saying one number is higher than another, our difference with its interval against the paper's, marked by verdict."}, "figure": {"caption": "Ours against the paper's, one direction of \"better\" per panel. Top left: Table 1's alignment errors (lower is better), by family. Top right: Table 2's InfoM, InfoE, InfoC, Table 3's AUROC and sparsity and Table 4's concentration (higher is better). Bottom left: Table 1's ICA efficiency, the share of the permutation-rigid gap ICA closes (higher is better; shaded: the paper's range). Bottom right: each claim saying one number is higher than another, our difference (95% interval) against the paper's, marked by verdict; above the dashed line is the paper's side. The grey line is equality. Points are named by the paper's rows; ours are the stand-ins the claims' tables name (MNIST CNNs for CheXpert, a tiny GPT-NeoX for Pythia, procedural analogues of the datasets, a simulated screen).", "name": "fig-07-tables"}}
fig = summary_figures.plot_ours_vs_paper(comparison, claims)
plt.show()

# %% tags=["remove-cell"]
results.save(results_path, {
    "counts": counts, "counts_fdr": counts_fdr, "outcomes": outcomes, "counts_by_kind": by_kind, "n_claims": len(counted), "n_rows": len(claims),
    "missing": missing,
    "claims": claims.drop(columns=["claim", "ours_label"]).to_dict(orient="records"),
    "n_paper_numbers": len(comparison),
}, params=P, profile=profile)

# %% [markdown] tags=["new-page:history"]
# (summary-history)=
# ## Appendix: what each interval resamples, and how the protocols changed
#
# Each chapter's verdicts rest on the resampling units the registry declares: independently
# trained models (seeds, replicates of a pair, MAEs) where retraining is the larger source
# of variance, evaluation units (rows, wells, (guide, fold) pairs) where nothing is trained
# or one training is all there is. The table gives, per chapter and unit, how many verdicts
# rest on it, their n and their minimum detectable effects at 80% power.

# %% tags=["remove-input"]
display(Markdown(scorecard.units_markdown(claims)))

# %% tags=["remove-cell"]
powered = counted[counted.units_needed.notna()]
glue("n_power", len(powered))
glue("n_power_short", int((powered.n < powered.units_needed).sum()))
glue("power_most", f"{int(powered.units_needed.max()):,}" if len(powered) else "–")

# %% [markdown]
# ## How many units the paper's effect would need
#
# A minimum number of units should come from a power calculation, not from the budget of the
# run. For each of the {glue:text}`n_power` counted claims where the paper prints the
# difference it tests (not a tie), the table gives the units its interval rests on and the
# number it would need to detect the paper's own difference beyond the claim's bound with
# 80% power at the spread we measured (Student's t for seeds and replicates, the normal for a
# bootstrap). {glue:text}`n_power_short` of them rest on fewer units than that; the largest
# need is {glue:text}`power_most`. Where we measure a much smaller spread than the paper's
# effect, two or three units suffice; where our effect is near zero and noisy, no affordable
# number would.
#
# The last column is the minimum the registry of claims declares for each claim: the same
# calculation, done once on a pilot run (the reference results named in each entry's
# `power` field; `benchmarks/power_calculation.py`), at least 3. For the pilot those minimums
# were read off its own spread; for every later run they are declared before its result.
# Where the paper gives no number to power against, the minimum stays the design's floor, and
# the entry says so. A verdict with fewer units than its minimum is still a valid test (its
# interval is honest); what it lacks is the power to find the paper's effect. The table lists
# the claims tested against one bound; the minimums of the equivalence claims (Table 1's ICA
# efficiencies, Figure A.4) are in the registry and flagged in the claims table above: for
# the efficiencies, ratios whose Fieller intervals are skewed, the calculation is a rough
# one and overstates the need. {glue:text}`n_below_min` counted verdicts rest on fewer units
# than their declared minimum.

# %% tags=["remove-input"]
display(Markdown(scorecard.power_markdown(counted)))

# %% [markdown]
# ## How the protocols changed
#
# A verdict is only as good as the record of when its protocol was chosen. Every claim is
# declared in the registry of claims (`lib/nearid/claims.yaml`), which records the commit
# that declared it and the commit whose reference results first held its verdict. The
# registry was created after the book's first results: {glue:text}`n_declared_after` of its
# {glue:text}`n_registry` entries were declared after their first result (those protocols
# were written down, not chosen, on that day), {glue:text}`n_declared_before` before it, and
# {glue:text}`n_declared_unresolved` have no recorded result yet. When a claim's test or
# protocol changes, its earlier version stays in the registry with the verdict it gave, and
# the registry's git history dates each change. The table lists every
# earlier version beside the protocol that replaced it and the verdict this build gives
# ({glue:text}`n_history` changes; each names the commit that made it, since changes made
# before the registry existed have no registry history of their own).

# %% tags=["remove-input"]
import pandas as pd

from nearid import claims as registry

history = pd.DataFrame(registry.history_rows(), columns=["claim_id", "chapter", "until", "protocol_then",
                                                         "verdict_then", "protocol_now"])
now = claims.set_index("claim_id")["verdict"]
history["verdict_now"] = [now.get(c, "not decided in this build") for c in history.claim_id]
glue("n_history", len(history))
order = [c.declared_before_result for c in registry.registry().values()]
glue("n_registry", len(order))
glue("n_declared_after", order.count(False))
glue("n_declared_before", order.count(True))
glue("n_declared_unresolved", order.count(None))
display(Markdown(scorecard.history_markdown(history)))
