"""``python -m streaming.demo``: the entry point of :mod:`streaming.apps.demo` (the application lives
there, apart from the library)."""

import sys

from streaming.apps.demo import main

if __name__ == "__main__":
    sys.exit(main())
