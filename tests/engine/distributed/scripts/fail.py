"""Train-like loop of AllReduces where rank FAIL_RANK raises at step 3 (in the main thread, or with WHERE=thread in
a thread of its own, or with WHERE=kill is killed by SIGKILL) while the others wait in the next collective; every
rank's at_abort callable writes OUT_DIR/rank<k>.flushed. Usage: fail.py OUT_DIR FAIL_RANK [WHERE]"""
import os
import signal
import sys
import threading
from pathlib import Path

import numpy as np

import engine.distributed as dist

out_dir, fail_rank = Path(sys.argv[1]), int(sys.argv[2])
dist.init()
rank = dist.rank()
dist.at_abort(lambda: (out_dir / f"rank{rank}.flushed").write_text(f"rank {rank} flushed\n"))
for step in range(1000):
    if rank == fail_rank and step == 3:
        if sys.argv[3:] == ["kill"]:
            print(f"rank {rank} kills itself", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if sys.argv[3:] == ["thread"]:
            def fail():
                raise ValueError(f"planted failure on rank {rank} in a thread")
            threading.Thread(target=fail, name="loader").start()
        else:
            raise ValueError(f"planted failure on rank {rank} at step {step}")
    dist.all_reduce(np.ones(1 << 16, dtype=np.float32))
print(f"rank {rank} finished all steps", flush=True)
