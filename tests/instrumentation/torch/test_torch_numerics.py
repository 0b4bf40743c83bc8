"""check_numerics=True on a torch model: the first aten op that produced NaN/Inf — forward, backward or optimizer —
with its module path and step, in the engine's nonfinite alert; engine.NonFiniteError (a FloatingPointError) stops
training, or it is only recorded."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import engine
from torch_helpers import LogOf, SqrtOfRelu, batches, train


def log_model() -> nn.Sequential:
    return nn.Sequential(LogOf(0.5), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def with_negative_inputs_at(digits, step: int, count: int = 6) -> list:
    data = batches(digits, count, batch_size=32)
    x, y = data[step]
    data[step] = (x - 1.0, y)  # digits are in [0, 1]: log(x - 1 + 0.5) is the log of a negative number
    return data


def test_log_of_a_negative_number_names_aten_log_its_module_and_step_then_raises(digits, tmp_path):
    data = with_negative_inputs_at(digits, step=3)
    model = log_model()
    handle, alerts, error = train(model, torch.optim.SGD(model.parameters(), lr=0.1), data, tmp_path / "run",
                                  check_numerics=True)
    assert isinstance(error, engine.NonFiniteError) and isinstance(error, FloatingPointError)
    assert (error.op, error.module, error.phase, error.step) == ("aten::log", "0", "forward", 3)
    [alert] = alerts
    assert (alert.kind, alert.severity, alert.subject, alert.step) == ("nonfinite", "error", "0", 3)
    log_input = data[3][0].numpy() + np.float32(0.5)  # the log's input, computed independently
    [stats] = alert.evidence["inputs"]
    assert stats["min"] == pytest.approx(float(log_input.min()))
    assert stats["max"] == pytest.approx(float(log_input.max()))
    assert stats["nan_count"] == 0 and stats["shape"] == [32, 64]
    assert alert.evidence["outputs"][0]["nan_count"] == int(np.count_nonzero(log_input < 0))
    assert "aten::log" in alert.message and "'0'" in alert.message and "step 3" in alert.message
    assert handle.alerts == alerts


def test_a_nested_module_is_named_by_its_dotted_path(digits, tmp_path):
    model = nn.Sequential(nn.Linear(64, 64), nn.Sequential(nn.ReLU(), LogOf(-0.5)), nn.Linear(64, 10))
    _, alerts, error = train(model, torch.optim.SGD(model.parameters(), lr=0.1), batches(digits, 2),
                             tmp_path / "run", check_numerics=True)
    assert (error.op, error.module, error.phase, error.step) == ("aten::log", "1.1", "forward", 0)


def test_recording_only_keeps_training_and_reports_the_first_origin_once(digits, tmp_path):
    data = with_negative_inputs_at(digits, step=2)
    model = log_model()
    _, alerts, error = train(model, torch.optim.SGD(model.parameters(), lr=0.1), data, tmp_path / "run",
                             check_numerics=True, raise_on_nonfinite=False)
    assert error is None
    assert [(a.kind, a.subject, a.step) for a in alerts if a.kind == "nonfinite"] == [("nonfinite", "0", 2)]


def test_an_infinite_gradient_is_found_in_the_backward_phase_in_its_module(digits, tmp_path):
    model = nn.Sequential(nn.Linear(64, 32), SqrtOfRelu(), nn.Linear(32, 10))
    _, alerts, error = train(model, torch.optim.SGD(model.parameters(), lr=0.1), batches(digits, 2),
                             tmp_path / "run", check_numerics=True)
    assert (error.module, error.phase, error.step) == ("1", "backward", 0)
    assert error.op.startswith("aten::")
    [alert] = alerts
    assert alert.evidence["outputs"][0]["posinf_count"] > 0
    assert all(stats["nan_count"] == 0 for stats in alert.evidence["inputs"])  # what came in was finite


def test_an_update_that_makes_weights_infinite_is_found_in_the_optimizer_phase(digits, tmp_path):
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=float("inf"))
    _, alerts, error = train(model, optimizer, batches(digits, 2), tmp_path / "run", check_numerics=True)
    assert (error.op, error.module, error.phase, error.step) == ("SGD.step", "0.weight", "optimizer", 0)
    assert alerts[0].evidence["inputs"][0]["nan_count"] == 0  # the gradient was finite; the update was not


def test_without_check_numerics_nothing_is_raised(digits, tmp_path):
    data = with_negative_inputs_at(digits, step=1, count=3)
    model = log_model()
    _, alerts, error = train(model, torch.optim.SGD(model.parameters(), lr=0.1), data, tmp_path / "run")
    assert error is None and "nonfinite" not in {a.kind for a in alerts}


def test_close_leaves_no_dispatch_mode_or_hook_behind(digits, tmp_path):
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    model = log_model()
    train(model, torch.optim.SGD(model.parameters(), lr=0.1), batches(digits, 2), tmp_path / "run",
          check_numerics=True)
    assert _get_current_dispatch_mode_stack() == []
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
