"""``python -m recio.im2rec``: the same command as ``recio im2rec``."""

import sys

from .cli import main

sys.exit(main())
