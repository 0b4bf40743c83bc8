"""Per-rank runs and flushing before an abort, with ``engine.distributed`` replaced by a stand-in."""
from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks
from engine.nn import functional as F
from event_helpers import event_files
from fake_distributed import FakeDistributed
from instrumentation import SummaryWriter, rank_logdir, watch
from instrumentation.format import tags
from instrumentation.format.alerts import ALERTS_RELPATH
from instrumentation.format.reader import EventFileReader
from instrumentation.profiler import profile
from test_rank_monitor_steps import scalars


@pytest.fixture
def distributed(monkeypatch):
    def install(rank: int, world_size: int, initialized: bool = True) -> FakeDistributed:
        module = FakeDistributed(rank, world_size, initialized)
        monkeypatch.setattr(engine, "distributed", module, raising=False)
        return module

    return install


def test_each_rank_of_a_job_gets_its_own_run(distributed, monkeypatch) -> None:
    monkeypatch.delattr(engine, "distributed", raising=False)
    assert rank_logdir("logs/exp") == "logs/exp"  # an engine without distributed training
    distributed(3, 4)
    assert rank_logdir("logs/exp") == os.path.join("logs/exp", "rank3")
    assert rank_logdir(Path("logs") / "exp") == os.path.join("logs", "exp", "rank3")
    distributed(0, 1)
    assert rank_logdir("logs/exp") == "logs/exp"  # one process: the run itself
    distributed(2, 4, initialized=False)
    assert rank_logdir("logs/exp") == "logs/exp"


def test_an_abort_flushes_what_the_writer_holds(distributed, tmp_path: Path) -> None:
    module = distributed(1, 2)
    writer = SummaryWriter(tmp_path / "rank1", flush_secs=3600)  # nothing reaches the file by itself meanwhile
    try:
        writer.add_scalar("loss", 0.5, 7)
        module.abort()
        (path,) = event_files(tmp_path / "rank1")
        assert [(e.step, v.tag) for e in EventFileReader(path).read() for v in e.values] == [(7, "loss")]
    finally:
        writer.close()
    module.abort()  # after close: nothing to do, nothing raised
    del writer
    gc.collect()
    module.abort()  # collected: the registration does not keep it alive, and is skipped


def test_an_abort_saves_the_profile_cycle_in_progress(distributed, tmp_path: Path) -> None:
    module = distributed(0, 2)
    model = engine.nn.Linear(4, 2)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    hooks.reset_step(0)
    prof = profile(tmp_path)
    prof.start()
    try:
        for _ in range(2):
            hooks.mark_step_begin()
            optimizer.zero_grad()
            model(engine.tensor(np.ones((3, 4), np.float32))).sum().backward()
            optimizer.step()
        module.abort()
        assert len(prof.traces_written) == 1
        assert prof.last_trace["metadata"]["rank"] == 0
    finally:
        prof.stop()
    assert len(prof.traces_written) == 1  # stop() after the abort's save has nothing left to write


def test_watch_attaches_a_rank_monitor_in_a_job_and_the_step_times_are_written_once_per_step(distributed,
                                                                                              tmp_path: Path) -> None:
    module = distributed(1, 2)
    engine.manual_seed(0)
    model = engine.nn.Sequential(engine.nn.Linear(8, 8), engine.nn.ReLU(), engine.nn.Linear(8, 3))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 8)).astype(np.float32), rng.integers(0, 3, 16)
    hooks.reset_step(0)
    run_dir = rank_logdir(tmp_path / "exp")
    with SummaryWriter(run_dir) as writer, watch(model, writer, memory=False, capture_requests=False) as handle:
        for _ in range(60):
            hooks.mark_step_begin()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(x)), engine.tensor(y))
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())
    read = scalars(tmp_path / "exp" / "rank1")
    for tag in tags.RANK_STEP_TAGS:
        assert [step for step, _ in read[tag]] == list(range(60)), tag  # every step, once: watch left them out
    assert [step for step, _ in read[tags.PARAM_CHECKSUM]] == [49]
    assert module.gathers == 3 + 1  # straggler windows at steps 19, 39, 59; the checksum's header (all agree)
    assert not os.path.exists(os.path.join(run_dir, ALERTS_RELPATH))


def test_watch_refuses_a_ranks_option_that_is_not_a_bool(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as writer, pytest.raises(TypeError, match="ranks"):
        watch(engine.nn.Linear(2, 2), writer, ranks="yes")
