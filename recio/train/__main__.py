"""``python -m recio.train`` and ``torchrun -m recio.train``."""

import sys

from .cli import main

sys.exit(main())
