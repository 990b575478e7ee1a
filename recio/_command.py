"""The ``recio`` command's entry points: the one place that changes the process's settings.

Importing a recio module changes nothing in the process (``tests/test_package.py`` checks
every module); the commands' mains (the console script :func:`main`, and the ``__main__``
modules of ``python -m recio.cli``, ``recio.im2rec`` and ``recio.train``) call
:func:`limit_blas_threads` first.
"""

from __future__ import annotations

import os


def limit_blas_threads() -> None:
    """One OpenBLAS thread for this process and the processes it starts.

    recio's commands do no linear algebra with numpy. Without this, numpy's OpenBLAS starts
    a thread per core when it loads and they spin for a while, taking CPU from the decode
    threads (about 4 % of an im2rec run on 2 cores). OpenBLAS reads the variable when numpy
    loads: the console script sets it before any import of numpy; a ``python -m`` main,
    after its package has loaded numpy, sets it for the worker processes it starts. A value
    the user set wins.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    """The ``recio`` console script: thread settings first, then the command line."""
    limit_blas_threads()
    from .cli.main import main as run_command

    return run_command(argv)
