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
# the chapters. Each verdict links to the section of its chapter that decides it, where the
# protocol, the numbers and our reading of any difference from the paper are given.
#
# Every claim is declared, before its result, in the registry of claims
# (`lib/nearid/claims.yaml`): what kind of statement it is, how it is tested, what its
# interval resamples and the fewest units we accept. Where our setting differs from the
# paper's (procedural analogues of the disentanglement datasets, a simulated cell screen,
# small models trained on a CPU), the chapter says so beside the numbers. Profile of this
# build: {glue:text}`profiles`.

# %% tags=["parameters", "remove-cell"]
profile = "quick"
overrides = {}
results_path = None

# %% tags=["remove-cell"]
import nearid  # first: it pins the CPU kernels before numpy and torch load (nearid.kernels)
from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns
from IPython.display import Markdown, display

from nearid.book import plotting, results, scorecard
from nearid.book.profiles import READS, resolve
from nearid.book.results import glue

P = resolve("07_summary", profile, overrides)
plotting.use_style()
folder = Path(results_path).parent if results_path else Path("book/executed")
chapter_results = scorecard.load_results(folder, READS["07_summary"])
claims = scorecard.claims_table(chapter_results)
comparison = scorecard.comparison_table(chapter_results)
counted = scorecard.paper_claims(claims)
counts = scorecard.verdict_counts(counted)
by_kind = scorecard.counts_by_kind(claims)
missing = [k for k, v in chapter_results.items() if v is None]
glue("n_claims", len(counted))
glue("n_other", len(claims) - len(counted))
glue("profiles", ", ".join(sorted(set(claims.profile))) or "none")
glue("n_one_training", int((counted.retraining == "not resampled").sum()))
glue("n_below_min", int((counted.n < counted.min_n).sum()))
glue("n_unconverged", int((counted.ica_converged == False).sum()))  # noqa: E712 (None: no ICA fit recorded)
for verdict, k in counts.items():
    glue(f"n_{verdict}", k)
glue("n_numbers", len(comparison))
glue("missing", ", ".join(missing) if missing else "none")

# %% [markdown]
# ## The claims
#
# Of the {glue:text}`n_claims` claims of the paper tested here (its claims in words and
# the orderings of its tables' numbers), {glue:text}`n_holds` hold,
# {glue:text}`n_inconclusive` are inconclusive and {glue:text}`n_fails` fail; the other
# {glue:text}`n_other` rows are ties the paper prints as 0, checks of our method and our own
# hypotheses, listed after them and not counted. Chapters without results when this page
# was built: {glue:text}`missing`.
#
# "paper" is the paper's number for the same quantity where it prints one; "ours" is our
# estimate, with its 95% interval. "test" says how the interval is read, as the registry
# declares: "> 0" (higher: the interval above 0), "> −m" (comparable: not below −m,
# non-inferiority) or "within ±m" (the same: inside ±m, equivalence). "MDE" is the smallest true effect the design would detect
# with 80% power, read off the interval: an inconclusive verdict with a large MDE says "too
# few units to tell", one with a small MDE "close to the threshold". "n" counts the units the
# interval resamples; "below" flags fewer than the registry's minimum, and "one training"
# flags an interval over evaluation units of a single trained model, which leaves out the
# variance of retraining ({glue:text}`n_one_training` of the counted claims;
# {glue:text}`n_below_min` below their declared minimum); "FastICA unconverged" flags a
# verdict that rests on a FastICA fit that stopped at its iteration cap
# ({glue:text}`n_unconverged` of the counted claims).

# %% tags=["remove-input"]
display(Markdown(scorecard.to_markdown(claims)))

# %% [markdown]
# ## Every number of Tables 1-4, ours against the paper's
#
# {numref}`fig-07-tables` puts each of the {glue:text}`n_numbers` numbers of the paper's
# Tables 1-4 that a chapter measured beside the paper's value. Points on the diagonal agree;
# the chapters explain the distance from it (smaller models, procedural or simulated data,
# CPU budgets).

# %% tags=["remove-input"] mystnb={"figure": {"caption": "Ours against the paper's, for every number of Tables 1-4 a chapter measured (Table 1: alignment errors; Table 2: InfoM, InfoE, InfoC; Table 3: AUROC and sparsity; Table 4: concentration). The grey line is equality.", "name": "fig-07-tables"}}
fig, ax = plt.subplots(figsize=(5.6, 5.2))
if len(comparison):
    sns.scatterplot(data=comparison, x="paper", y="ours", hue="table", style="table", s=40, ax=ax)
    lo = min(comparison.paper.min(), comparison.ours.min(), 0.0)
    hi = max(comparison.paper.max(), comparison.ours.max(), 1.0)
    ax.plot([lo, hi], [lo, hi], color=plotting.PAPER_COLOR, lw=1, zorder=0)
    ax.set(xlim=(lo, hi), ylim=(lo, hi))
ax.set(xlabel="the paper's number", ylabel="ours", aspect="equal")
plt.show()

# %% tags=["remove-cell"]
results.save(results_path, {
    "counts": counts, "counts_by_kind": by_kind, "n_claims": len(counted), "n_rows": len(claims),
    "missing": missing,
    "claims": claims.drop(columns=["claim"]).to_dict(orient="records"),
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

# %% [markdown]
# ## How the protocols changed
#
# A verdict is only as good as the record of when its protocol was chosen. Every claim is
# declared in the registry of claims (`lib/nearid/claims.yaml`) before its result; when a
# claim's test or protocol changes, its earlier version stays in the registry with the
# verdict it gave, and the registry's git history dates each change. The table lists every
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
display(Markdown(scorecard.history_markdown(history)))
