"""Limits and parameters several chapters share."""

import re

from nearid.book.params import Boolean, Options, Text

MNIST_TRAIN, MNIST_TEST = 60_000, 10_000  # images in MNIST's training and test sets
POWER_OF_TWO = Options(tuple(2 ** k for k in range(3, 11)))  # image sides the conv models take


# Scale-out (nearid.tasks): where a chapter's sweep tasks run, and the full-shape dry run.
def _scheduler_address(value: str) -> None:
    """"", "local", or an address Dask accepts: [protocol://]host[:port]."""
    if value not in ("", "local") and not re.fullmatch(r"([a-z]+://)?[\w.\-\[\]]+(:\d+)?", value):
        raise ValueError(value)


# auto: $NEARID_EXECUTOR, else inprocess; processes: a local pool of $NEARID_WORKERS processes
# (default one per core); dask: the scheduler below.
EXECUTOR = Options(("auto", "inprocess", "processes", "dask"))
SCHEDULER = Text(_scheduler_address, what='"" ($NEARID_SCHEDULER), a Dask scheduler address such as '
                 '"tcp://host:8786", or "local" (a LocalCluster of $NEARID_WORKERS processes for this run)')
DRY_RUN = Boolean()  # True: every task stops after 2 optimisation steps, evaluation subsampled
