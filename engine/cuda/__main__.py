"""``python -m engine.cuda --check``: see engine/cuda/check.py."""
from __future__ import annotations

import sys

from engine.cuda.check import main

if __name__ == "__main__":
    sys.exit(main())
