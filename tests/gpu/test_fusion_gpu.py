"""Fused elementwise chains on a real device: one launch of the generated kernel per fused node, with the host ufunc
chain's bits (tests/gpu/fusion_cases.py), and a traced training step whose fused nodes all launch their kernel."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from fusion_cases import (CHAINS, DTYPES, RESIDUAL_CHAINS, SHAPE, chain_matches_host, fused_node, residual_training,
                          same_bits, values)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_generated_kernel_gives_the_host_bits(cp, chain, dtype):
    chain_matches_host(cp, chain, dtype)


def test_strided_views_are_read_through_their_strides(cp):
    """A transposed and a row-reversed view (which the emulator cannot pass) read in place by the generated kernel."""
    node = fused_node(*CHAINS["add_neg_mul_sub"][:2], np.float32)
    rng = np.random.default_rng(7)
    x, y, z = values(rng, SHAPE, np.float32), values(rng, SHAPE[::-1], np.float32), values(rng, SHAPE, np.float32)
    with np.errstate(all="ignore"):
        expected = node.run(x, y.T, z[::-1])
    result = node.run(cp.asarray(x), cp.asarray(y).T, cp.asarray(z)[::-1])
    assert node.run.kernel.launches == 1 and same_bits(cp.asnumpy(result), expected)


def test_traced_step_on_the_device_launches_every_fused_kernel_and_follows_the_cpu(cp):
    _, cpu_step, cpu_losses = residual_training(5, "cpu", double=True)
    _, gpu_step, gpu_losses = residual_training(5, "cuda", double=True)
    fused = [n for n in gpu_step.graphs()[0][1].nodes if n.kind == "fused"]
    assert {tuple(u.__name__ for u, _ in n.steps) for n in fused} == RESIDUAL_CHAINS
    for node in fused:
        assert node.run.kernel is not None and node.run.kernel.fallback is None, node.op
        assert node.run.kernel.launches == 4, node.op  # every replay (the trace runs eagerly)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-10)
    assert engine.cuda.is_available()
