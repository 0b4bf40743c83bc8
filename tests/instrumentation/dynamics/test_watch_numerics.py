"""check_numerics=True: the first op that produced NaN/Inf — forward, backward or optimizer — is named in an alert
with its inputs' statistics, and engine.NonFiniteError stops training (or, by option, it is only recorded)."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks, nn
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.dynamics.numerics import array_stats, has_nonfinite
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader

from dynamics_helpers import LogOf


class SqrtOfRelu(nn.Module):
    """sqrt(relu(x)): finite forward, but d sqrt/dx = 1/(2·sqrt(0)) = inf where the ReLU output is exactly 0."""

    def forward(self, x):
        return x.relu().sqrt()


class _OtherCheck:
    def op(self, op, module, inputs, outputs, output_bytes, start_ns):
        pass


@pytest.fixture(params=["alone", "beside another op recorder"])
def numerics_path(request):
    """watch()'s numerics check is an op recorder: alone, or with another op recorder in the list before it."""
    other = hooks.add_recorder(_OtherCheck()) if request.param != "alone" else None
    yield request.param
    hooks.remove_recorder(other)


def run_hand_loop(model, optimizer, batches, logdir, **options):
    """Train on ``batches``; returns (error raised or None, alerts in the run's alerts file, losses)."""
    hooks.reset_step(0)
    losses, error = [], None
    with SummaryWriter(logdir) as writer, watch(model, writer, check_numerics=True, **options):
        try:
            for x, y in batches:
                optimizer.zero_grad()
                loss = F.cross_entropy(model(engine.tensor(x)), engine.tensor(y))
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        except engine.NonFiniteError as raised:
            error = raised
    return error, AlertReader(logdir / ALERTS_RELPATH).read(), losses


def batches_with_negative_inputs_at(digits, step, count=6):
    (x, y), _ = digits
    batches = [(x[i * 32:(i + 1) * 32], y[i * 32:(i + 1) * 32]) for i in range(count)]
    bad_x = batches[step][0] - 1.0  # digits are in [0, 1]: log(x - 1 + 0.5) is log of a negative number
    batches[step] = (bad_x, batches[step][1])
    return batches


def log_model():
    engine.manual_seed(0)
    return nn.Sequential(LogOf(0.5), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def test_log_of_a_negative_number_names_the_op_module_phase_and_step_then_raises(digits, tmp_path, numerics_path):
    batches = batches_with_negative_inputs_at(digits, step=3)
    model = log_model()
    error, alerts, losses = run_hand_loop(model, engine.optim.SGD(model.parameters(), lr=0.1), batches,
                                          tmp_path / "run")
    assert isinstance(error, engine.NonFiniteError) and isinstance(error, FloatingPointError)
    assert (error.op, error.module, error.phase, error.step) == ("Log", "0", "forward", 3)
    assert len(losses) == 3 and all(np.isfinite(losses))
    [alert] = alerts
    assert (alert.kind, alert.severity, alert.subject, alert.step) == ("nonfinite", "error", "0", 3)
    log_input = batches[3][0] + np.float32(0.5)  # the Log op's input, computed independently
    [stats] = alert.evidence["inputs"]
    assert stats["min"] == pytest.approx(float(log_input.min()))
    assert stats["max"] == pytest.approx(float(log_input.max()))
    assert stats["nan_count"] == 0 and stats["shape"] == [32, 64]
    assert alert.evidence["outputs"][0]["nan_count"] == int(np.count_nonzero(log_input < 0))
    assert "Log" in alert.message and "'0'" in alert.message and "step 3" in alert.message


def test_recording_only_keeps_training_and_reports_the_first_origin_once(digits, tmp_path):
    batches = batches_with_negative_inputs_at(digits, step=2)
    model = log_model()
    error, alerts, losses = run_hand_loop(model, engine.optim.SGD(model.parameters(), lr=0.1), batches,
                                          tmp_path / "run", raise_on_nonfinite=False)
    assert error is None and len(losses) == len(batches) and np.isnan(losses[2])
    assert [(a.kind, a.subject, a.step) for a in alerts if a.kind == "nonfinite"] == [("nonfinite", "0", 2)]


def test_an_infinite_gradient_is_found_in_the_backward_phase(digits, tmp_path, numerics_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), SqrtOfRelu(), nn.Linear(32, 10))
    error, alerts, _ = run_hand_loop(model, engine.optim.SGD(model.parameters(), lr=0.1), [(x[:32], y[:32])],
                                     tmp_path / "run")
    assert (error.op, error.module, error.phase, error.step) == ("SqrtBackward", "1", "backward", 0)
    assert alerts[0].evidence["outputs"][0]["posinf_count"] > 0
    assert alerts[0].evidence["inputs"][0]["nan_count"] == 0  # the incoming gradient was finite


def test_an_update_that_makes_weights_infinite_is_found_in_the_optimizer_phase(digits, tmp_path, numerics_path):
    (x, y), _ = digits
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    optimizer = engine.optim.SGD(model.parameters(), lr=float("inf"))
    error, alerts, _ = run_hand_loop(model, optimizer, [(x[:32], y[:32])] * 2, tmp_path / "run")
    assert (error.op, error.module, error.phase, error.step) == ("SGD.step", "0.weight", "optimizer", 0)
    assert alerts[0].evidence["inputs"][0]["nan_count"] == 0  # the gradient was finite; the update was not


def test_the_cheap_check_agrees_with_the_full_one_also_when_the_sum_overflows():
    huge = np.full(4, 3e38, np.float32)  # finite values whose float32 sum overflows to inf
    assert not has_nonfinite(huge)
    for bad in (np.nan, np.inf, -np.inf):
        array = np.zeros((3, 5), np.float32)
        array[1, 2] = bad
        assert has_nonfinite(array)
    assert not has_nonfinite(np.arange(5))  # integers are never non-finite
    stats = array_stats(np.array([1.0, np.nan, -np.inf, 4.0, np.inf, np.inf]))
    assert (stats["min"], stats["max"], stats["nan_count"], stats["posinf_count"], stats["neginf_count"]) == \
        (1.0, 4.0, 1, 2, 1)
