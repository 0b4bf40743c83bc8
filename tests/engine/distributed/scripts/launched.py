"""Started by engine.distributed.launch: each rank writes what it sees and exits with EXIT_CODE.
Usage: launched.py OUT_DIR EXIT_CODE [ARGS...]"""
import json
import os
import sys
from pathlib import Path

import engine.distributed as dist

dist.init()
(Path(sys.argv[1]) / f"rank{dist.rank()}.json").write_text(json.dumps({
    "rank": dist.rank(), "size": dist.world_size(), "omp": os.environ.get("OMP_NUM_THREADS"), "argv": sys.argv[3:]}))
sys.exit(int(sys.argv[2]))
