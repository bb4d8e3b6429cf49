"""``python -m scheduling.simulator``: ``manage.py simulate`` without Django (no settings, secret
key or database); the arguments and output are the same (``scheduling.simulator.cli``)."""

from __future__ import annotations

import sys

from scheduling.simulator.cli import main

if __name__ == "__main__":
    sys.exit(main())
