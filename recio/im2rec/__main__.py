"""``python -m recio.im2rec``: the same command as ``recio im2rec``."""

import sys

from .._command import limit_blas_threads
from .cli import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    limit_blas_threads()
    sys.exit(main())
