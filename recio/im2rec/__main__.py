"""``python -m recio.im2rec``: the same command as ``recio im2rec``."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    sys.exit(main())
