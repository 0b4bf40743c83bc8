"""Torch stays optional: importing instrumentation, and watching an engine model, never imports torch."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from instrumentation import watch


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_instrumentation_and_watching_an_engine_model_never_imports_torch(tmp_path):
    out = run_python(f"""
        import sys
        import instrumentation, instrumentation.monitor, instrumentation.torch, instrumentation.dynamics
        from instrumentation import SummaryWriter, watch
        import engine
        model = engine.nn.Sequential(engine.nn.Linear(4, 3), engine.nn.ReLU(), engine.nn.Linear(3, 2))
        optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
        with SummaryWriter({str(tmp_path)!r}) as writer, watch(model, writer, every=1, memory=False) as handle:
            loss = (model(engine.tensor([[1.0, 2.0, 3.0, 4.0]])) ** 2).sum()
            loss.backward()
            optimizer.step()
            handle.log_loss(loss)
        print("torch" in sys.modules, instrumentation.torch.is_torch_module(model))
        """)
    assert out == "False False"


def test_a_torch_model_is_told_from_an_engine_one_and_a_wrong_optimizer_is_refused(tmp_path):
    import torch

    from instrumentation import SummaryWriter
    from instrumentation.torch import is_torch_module

    model = torch.nn.Linear(3, 2)
    assert is_torch_module(model) and not is_torch_module(object())
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(TypeError, match="torch.optim.Optimizer"):
            watch(model, writer, optimizer=object())
        with pytest.raises(NotImplementedError, match="ranks"):
            watch(model, writer, ranks=True)
        assert all(not m._forward_pre_hooks for m in model.modules())  # nothing left behind by the refusals
