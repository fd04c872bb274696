"""Limits and parameters several chapters share."""

from nearid.book.params import Boolean, Options, Text

MNIST_TRAIN, MNIST_TEST = 60_000, 10_000  # images in MNIST's training and test sets
POWER_OF_TWO = Options(tuple(2 ** k for k in range(3, 11)))  # image sides the conv models take

# Scale-out (nearid.tasks): where a chapter's sweep tasks run, and the full-shape dry run.
EXECUTOR = Options(("auto", "inprocess", "processes", "dask"))  # auto: $NEARID_EXECUTOR, else inprocess
SCHEDULER = Text(what='"" ($NEARID_SCHEDULER) or a Dask scheduler address such as "tcp://host:8786"')
DRY_RUN = Boolean()  # True: every task stops after 2 optimisation steps, evaluation subsampled
