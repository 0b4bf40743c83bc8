"""`python -m board` is the same as the `board` command."""
from __future__ import annotations

import sys

from board.cli import main

sys.exit(main())
