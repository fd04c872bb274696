"""Limits and parameters several chapters share."""

import re

from nearid.book.params import Boolean, Options, Text
from nearid.tasks import EXECUTOR  # noqa: F401  (the chapters' `executor` parameter: run_tasks' rule)

MNIST_TRAIN, MNIST_TEST = 60_000, 10_000  # images in MNIST's training and test sets
POWER_OF_TWO = Options(tuple(2 ** k for k in range(3, 11)))  # image sides the conv models take


# Scale-out (nearid.tasks): where a chapter's sweep tasks run, and the full-shape dry run.
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # the Dask comm protocols a scheduler listens on
_ADDRESS = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?)"
                      r":(?P<port>\d{1,5})")


def scheduler_address(value: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a Dask scheduler address ``[scheme://]host:port`` (scheme
    tcp when left out, as Dask reads it); ValueError naming what is wrong otherwise.

    The port is required: a bare word such as ``foo`` is far more often a typo (of ``local``,
    or of a host without its port) than a scheduler listening on Dask's default port."""
    m = _ADDRESS.fullmatch(value)
    if m is None:
        raise ValueError(f"{value!r} is not [scheme://]host:port")
    scheme = m["scheme"] or "tcp"
    if scheme not in SCHEDULER_SCHEMES:
        raise ValueError(f"{value!r}: unknown scheme {scheme!r}; Dask schedulers listen on "
                         f"{', '.join(s + '://' for s in SCHEDULER_SCHEMES)}")
    port = int(m["port"])
    if not 1 <= port <= 65535:
        raise ValueError(f"{value!r}: port {port} is not in 1..65535")
    return scheme, m["host"].strip("[]"), port


def _scheduler_address(value: str) -> None:
    """"", "local", or an address Dask accepts: [scheme://]host:port."""
    if value not in ("", "local"):
        scheduler_address(value)


# EXECUTOR: auto = $NEARID_EXECUTOR, else inprocess; processes: a local pool of $NEARID_WORKERS
# processes (default one per core); dask: the scheduler below.
SCHEDULER = Text(_scheduler_address, what='"" ($NEARID_SCHEDULER), a Dask scheduler address [scheme://]host:port '
                 'such as "tcp://host:8786" (scheme tcp, tls, ws, wss or ucx; tcp if left out), or "local" '
                 '(a LocalCluster of $NEARID_WORKERS processes for this run)')
DRY_RUN = Boolean()  # True: every task stops after 2 optimisation steps, evaluation subsampled
# The scale-out defaults of every chapter with tasks (each profile module spreads it into _SHARED).
SCALE_OUT = dict(executor="auto", scheduler="", dry_run=False)
