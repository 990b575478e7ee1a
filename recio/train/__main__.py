"""``python -m recio.train`` and ``torchrun -m recio.train``."""

import sys

from .._command import limit_blas_threads
from .cli import main

limit_blas_threads()
sys.exit(main())
