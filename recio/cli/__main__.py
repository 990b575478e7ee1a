"""``python -m recio.cli``: the ``recio`` command."""

import sys

from .._command import main

sys.exit(main())
