"""``python -m thinwan``: the same command line as ``thinwan``."""

import sys

from .cli import main

# The guard matters: worker processes (spawned) import the main module as __mp_main__.
if __name__ == "__main__":
    sys.exit(main())
