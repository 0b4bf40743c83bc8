"""``python -m instrumentation.demo --logdir DIR``: train the demo's runs into DIR and return."""
from __future__ import annotations

import sys

from instrumentation.demo.cli import main

sys.exit(main())
