"""Replica agreement: dist/param_checksum is the 24-bit checksum of every parameter's bytes, equal on agreeing ranks;
a rank whose parameters differ from rank 0's writes replica_divergence naming them, once per episode."""
from __future__ import annotations

import binascii
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import nn
from instrumentation.distributed import RankMonitor
from instrumentation.format import alert_names as keys
from instrumentation.format import tags
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.summary import SummaryWriter
from rank_threads import play_step, run_ranks
from test_rank_monitor_steps import scalars

EVERY = 5


def model() -> nn.Module:
    engine.manual_seed(7)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def expected_checksum(module: nn.Module) -> int:
    """The documented combination, computed apart: crc32 of each parameter's bytes, crc32 of those as uint32 LE."""
    crcs = [binascii.crc32(param.numpy().tobytes()) for _, param in module.named_parameters()]
    return binascii.crc32(struct.pack(f"<{len(crcs)}I", *crcs)) & 0xFFFFFF


def train(tmp_path: Path, world_size: int, perturb: dict[int, int], steps: int = 4 * EVERY) -> list[tuple]:
    """Each rank (a thread) holds its own copy of the model; ``perturb[rank] = step``: after that step the rank adds
    1e-3 to one weight of its second layer (as a rank bypassing the gradient averaging would). Returns per rank its
    model, its monitor and the alerts its file holds."""
    models = [model() for _ in range(world_size)]  # created here: manual_seed is process-global

    def body(rank: int, member) -> tuple:
        run_dir = tmp_path / f"rank{rank}"
        with SummaryWriter(run_dir) as writer, RankMonitor(writer, models[rank], checksum_every=EVERY,
                                                           group=member) as monitor:
            for step in range(steps):
                if perturb.get(rank) == step:
                    weight = models[rank][2].weight
                    values = weight.numpy()
                    values[1, 2] += 1e-3
                play_step(monitor, step)
        return models[rank], monitor, AlertReader(os.path.join(run_dir, ALERTS_RELPATH)).read()

    return run_ranks(world_size, body)


def test_agreeing_replicas_log_the_same_exact_checksum_and_raise_nothing(tmp_path: Path) -> None:
    results = train(tmp_path, 2, perturb={})
    expected = expected_checksum(results[0][0])
    for rank, (_, monitor, alerts) in enumerate(results):
        assert alerts == []
        logged = scalars(tmp_path / f"rank{rank}")[tags.PARAM_CHECKSUM]
        assert logged == [(step, float(expected)) for step in (4, 9, 14, 19)]  # float32 holds 24 bits exactly
        assert monitor.checksums == [(step, expected) for step in (4, 9, 14, 19)]


@pytest.mark.parametrize("world_size", [2, 4])
def test_the_rank_that_drifted_names_the_parameter_and_both_checksums(tmp_path: Path, world_size: int) -> None:
    drifted = 1
    results = train(tmp_path, world_size, perturb={drifted: 6})
    reference_model, drifted_model = results[0][0], results[drifted][0]
    for rank, (_, _, alerts) in enumerate(results):
        if rank != drifted:
            assert alerts == []
    (alert,) = results[drifted][2]  # checks at steps 9, 14, 19 all differ: one episode, one alert
    assert (alert.kind, alert.subject, alert.step, alert.severity) == (keys.REPLICA_DIVERGENCE, "rank1", 9, "error")
    weight_name = "2.weight"
    own = binascii.crc32(drifted_model[2].weight.numpy().tobytes())
    reference = binascii.crc32(reference_model[2].weight.numpy().tobytes())
    assert alert.evidence == {keys.PARAMETERS: [weight_name], keys.CHECKSUM: expected_checksum(drifted_model),
                              keys.REFERENCE_CHECKSUM: expected_checksum(reference_model), keys.REFERENCE_RANK: 0,
                              keys.RANK: drifted, keys.PARAMETER_CHECKSUMS: {weight_name: [own, reference]}}
    assert expected_checksum(drifted_model) != expected_checksum(reference_model)
    logged = dict(scalars(tmp_path / "rank1")[tags.PARAM_CHECKSUM])
    assert logged[4] == float(expected_checksum(reference_model))  # before the drift: agreed
    assert logged[9] == float(expected_checksum(drifted_model))


def test_every_rank_makes_the_same_collective_calls(tmp_path: Path) -> None:
    # the per-parameter exchange happens on every rank or on none: a rank that waited alone would hang the job
    # (the thread group's barrier would break after its hang guard)
    results = train(tmp_path, 4, perturb={3: 2})
    assert [len(r[2]) for r in results] == [0, 0, 0, 1]


def test_a_rank_whose_checksums_fail_makes_the_calls_all_the_same(tmp_path: Path, capsys) -> None:
    class Broken:
        def numpy(self) -> np.ndarray:
            raise RuntimeError("device lost")

    class BrokenModel:
        def named_parameters(self):
            return iter([("w", Broken())])

    def body(rank: int, member) -> tuple:
        with SummaryWriter(tmp_path / f"rank{rank}") as writer:
            with RankMonitor(writer, BrokenModel() if rank == 1 else model(), checksum_every=2,
                             group=member) as monitor:
                for step in range(6):
                    play_step(monitor, step)
        return monitor.checksums, monitor.alerts

    (sums0, alerts0), (sums1, alerts1) = run_ranks(2, body)
    assert [s for s, _ in sums0] == [1, 3, 5] and sums1 == [] and alerts0 == alerts1 == []
    assert capsys.readouterr().err.count("device lost") == 1  # reported once, training goes on
