#!/usr/bin/env python3
"""Drop-in for MXNet's ``tools/im2rec.py``: ``python tools/im2rec.py PREFIX ROOT [options]``.

Same arguments and outputs as MXNet 1.9.1's script (see ``recio im2rec --help`` for
recio's additions). Run from a source checkout it uses that checkout's recio, so the
script and the package never drift apart; elsewhere, the installed one.
"""

import os
import sys

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, "recio", "im2rec", "__init__.py")):
    sys.path.insert(0, _CHECKOUT)

# No linear algebra here: keep numpy's OpenBLAS from spinning up a thread per core (see
# recio/cli/__init__.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from recio.im2rec import main  # noqa: E402  (after choosing the checkout)

if __name__ == "__main__":
    sys.exit(main())
