"""``python -m recio.cli``: the ``recio`` command."""

import sys

from . import main

sys.exit(main())
