"""The demo's command line: train the chosen runs one after the other, say what each raised, or keep one live."""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence

from instrumentation.demo.common import fresh_run_dir
from instrumentation.demo.live import train_live
from instrumentation.demo.runs import RUNS, DemoRun
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.ranks import rank_of


def raised_kinds(run_dir: str) -> list[str]:
    """The alert kinds a run (and its ``rank<k>`` sub-runs) wrote, in the order first raised, each once."""
    kinds: list[str] = []
    ranks = sorted(name for name in os.listdir(run_dir) if rank_of(name) is not None) if os.path.isdir(run_dir) else []
    for directory in [run_dir] + [os.path.join(run_dir, name) for name in ranks]:
        for alert in AlertReader(os.path.join(directory, ALERTS_RELPATH)).read():
            if alert.kind not in kinds:
                kinds.append(alert.kind)
    return kinds


def train_run(run: DemoRun, logdir: str, seed: int) -> tuple[str, str]:
    """Train ``run`` into ``logdir/<run.name>`` (replacing an earlier demo's copy); its directory and outcome."""
    run_dir = fresh_run_dir(logdir, run.name)
    return run_dir, run.train(run_dir, seed)


def _pick(names: str) -> list[DemoRun]:
    known = {run.name: run for run in RUNS}
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise ValueError(f"unknown demo run(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return [known[name] for name in chosen]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instrumentation.demo", description=__doc__)
    parser.add_argument("--logdir", default="logs", help="log directory to write the runs into (default: logs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default=",".join(run.name for run in RUNS),
                        help="comma-separated runs to train (default: all): " + ", ".join(r.name for r in RUNS))
    parser.add_argument("--live", type=float, metavar="SECONDS", default=None,
                        help="instead: train one healthy run, 'live', for this long (0: until Ctrl-C), to try the "
                             "board's live updates and its Capture button")
    args = parser.parse_args(argv)
    try:
        chosen = _pick(args.runs)
    except ValueError as error:
        parser.error(str(error))
    os.makedirs(args.logdir, exist_ok=True)
    if args.live is not None:
        return train_live(args.logdir, args.seed, args.live)
    began = time.perf_counter()
    for run in chosen:
        started = time.perf_counter()
        run_dir, outcome = train_run(run, args.logdir, args.seed)
        raised = raised_kinds(run_dir)
        print(f"demo: {run.name:<14} {time.perf_counter() - started:5.1f} s  {outcome}; alerts: "
              f"{', '.join(raised) or 'none'}", flush=True)
    print(f"demo: {len(chosen)} runs in {time.perf_counter() - began:.1f} s, written to {args.logdir}; "
          f"see them with `board --logdir {args.logdir}`", flush=True)
    return 0
