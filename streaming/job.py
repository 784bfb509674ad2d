"""``python -m streaming.job``: the entry point of :mod:`streaming.apps.job` (the application lives
there, apart from the library)."""

import sys

from streaming.apps.job import main

if __name__ == "__main__":
    sys.exit(main())
