"""A papermill engine for running chapters by hand: ``papermill --engine nearid ...``.

papermill's default engine starts the kernelspec's ``ipykernel`` over plain TCP, and the
kernel then warns on every start that its traffic could be read. This engine runs the chapter
exactly as ``nearid run`` does: in the kernel that dies with the process that started it, with
CurveZMQ-encrypted sockets where pyzmq supports them, so the warning has nothing to warn about.
It is registered under the ``papermill.engine`` entry point (``pyproject.toml``).
"""

from __future__ import annotations

from papermill.engines import NBClientEngine


class NearidEngine(NBClientEngine):
    """papermill's nbclient engine with :mod:`nearid.book.kernel` as the kernel."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
        from nearid.book.runner import _kernel_manager_class

        kwargs.setdefault("kernel_manager_class", _kernel_manager_class())
        return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)
