"""SystemSampler with an injected fake NVML (the real one is checked by bench/nvml_check.py on a GPU machine)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from engine import hooks
import instrumentation.system as system
from instrumentation import SummaryWriter, SystemSampler
from event_helpers import event_files, read_run
from fake_pynvml import fake_pynvml
from instrumentation.format import EventFileReader, ScalarValue, tags


def test_fake_nvml_sample_has_every_gpu_metric() -> None:
    nvml = fake_pynvml()
    sampler = SystemSampler(writer=None, nvml=nvml, start=False)
    values = sampler.sample()
    assert values["sys/gpu0/mem_used_bytes"] == 1 << 30 and values["sys/gpu1/mem_used_bytes"] == 2 << 30
    assert values["sys/gpu1/mem_total_bytes"] == 80 << 30
    assert values["sys/gpu0/util_percent"] == 10 and values["sys/gpu1/util_percent"] == 20
    assert values["sys/gpu1/power_w"] == 101.0 and values["sys/gpu1/temperature_c"] == 61
    assert values["sys/gpu0/process_mem_bytes"] == 512 << 20 and values["sys/gpu1/process_mem_bytes"] == 0
    assert values["sys/rss_bytes"] >= psutil.Process().memory_info().rss * 0.5
    sampler.close()
    assert nvml.calls["shutdown"] == 1


def test_the_sampled_tags_are_the_format_s_names() -> None:
    sampler = SystemSampler(writer=None, nvml=fake_pynvml(gpus=2), start=False)
    expected = {tags.system_tag(m) for m in tags.HOST_METRICS} | {tags.gpu_tag(i, m) for i in (0, 1)
                                                                    for m in tags.GPU_METRICS}
    assert set(sampler.sample()) == expected
    sampler.close()


def test_unsupported_metric_is_dropped_for_that_gpu_only(capsys) -> None:
    sampler = SystemSampler(writer=None, nvml=fake_pynvml(unsupported=(1, "power")), start=False)
    first, second = sampler.sample(), sampler.sample()
    assert "sys/gpu0/power_w" in second and "sys/gpu1/power_w" not in first and "sys/gpu1/temperature_c" in second
    assert capsys.readouterr().err.count("GPU 1: power is not available") == 1
    sampler.close()


@pytest.fixture()
def fresh_process_notices(monkeypatch) -> None:
    """As in a new process: no "no GPU metrics" notice said yet."""
    monkeypatch.setattr(system, "_notices_said", set())


@pytest.mark.parametrize("nvml", [fake_pynvml(init_error=True), fake_pynvml(gpus=0)])
def test_no_gpu_is_one_informational_line(nvml, capsys, fresh_process_notices) -> None:
    sampler = SystemSampler(writer=None, nvml=nvml, start=False)
    values = sampler.sample()
    sampler.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flowscope.system: info: no GPU metrics")
    assert "CPU and memory are sampled" in err[0]
    assert set(values) == {"sys/cpu_percent", "sys/rss_bytes"}


def test_the_no_gpu_notice_is_said_once_per_process(capsys, fresh_process_notices) -> None:
    """The demo starts a sampler per run (8 of them): the reason NVML is missing is said at the first only."""
    for _ in range(8):
        SystemSampler(writer=None, nvml=fake_pynvml(init_error=True), start=False).close()
    assert capsys.readouterr().err.count("no GPU metrics") == 1
    SystemSampler(writer=None, nvml=fake_pynvml(gpus=0), start=False).close()  # another reason is said, once
    SystemSampler(writer=None, nvml=fake_pynvml(gpus=0), start=False).close()
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "NVML sees no GPU" in line


def test_this_machine_without_a_gpu_is_graceful(capsys, fresh_process_notices) -> None:
    sampler = SystemSampler(writer=None, start=False)  # the real pynvml: this machine has no NVIDIA driver
    values = sampler.sample()
    sampler.close()
    if sampler.status.startswith("sampling"):
        pytest.skip("this machine has an NVIDIA GPU")
    assert set(values) == {"sys/cpu_percent", "sys/rss_bytes"}
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_samples_share_the_step_axis_one_point_per_step(tmp_path: Path) -> None:
    hooks.reset_step(0)
    with SummaryWriter(tmp_path) as writer:
        sampler = SystemSampler(writer, nvml=fake_pynvml(gpus=1), start=False, stall_flush_s=1e9)
        for step in range(3):
            for _ in range(3):  # three samples while each step is in progress
                sampler.tick()
            hooks.mark_step_end()
        sampler.close()
    hooks.reset_step(0)
    points: dict[str, list[tuple[int, float]]] = {}
    for path in event_files(tmp_path):  # (the run also has plugins/: the sampler's GPU status)
        for event in EventFileReader(path).read():
            for value in event.values:
                if isinstance(value, ScalarValue):
                    points.setdefault(value.tag, []).append((value.step, value.value))
    assert [step for step, _ in points["sys/gpu0/util_percent"]] == [0, 1, 2]
    assert {value for _, value in points["sys/gpu0/util_percent"]} == {10.0}
    assert [step for step, _ in points["sys/rss_bytes"]] == [0, 1, 2]


def test_children_rss_is_included() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(30)"])
    try:
        sampler = SystemSampler(writer=None, gpus=False, start=False)
        own = psutil.Process().memory_info().rss
        for _ in range(100):  # wait (bounded) until the child has touched its 64 MiB
            child_rss = psutil.Process(child.pid).memory_info().rss
            if child_rss > 60 << 20:
                break
            time.sleep(0.05)
        assert sampler.sample()["sys/rss_bytes"] >= own + (60 << 20)
        sampler.close()
    finally:
        child.kill()
        child.wait()


def test_thread_writes_and_close_is_idempotent(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as writer:
        sampler = SystemSampler(writer, interval=0.01, gpus=False)
        deadline = time.monotonic() + 10
        while sampler._pending_step is None and time.monotonic() < deadline:  # bounded wait for one sample
            time.sleep(0.01)
        sampler.close()
        sampler.close()
        assert not sampler._thread.is_alive()


def test_a_run_shorter_than_the_interval_gets_a_last_sample_at_close(tmp_path: Path) -> None:
    hooks.reset_step(5)
    with SummaryWriter(tmp_path) as writer:
        sampler = SystemSampler(writer, interval=3600.0, gpus=False)
        sampler.close()
        sampler.close()  # idempotent: no second sample
    hooks.reset_step(0)
    points = [(value.tag, value.step) for path in event_files(tmp_path)
              for event in EventFileReader(path).read() for value in event.values]
    assert sorted(points) == [("sys/cpu_percent", 5), ("sys/rss_bytes", 5)]


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval"):
        SystemSampler(writer=None, interval=0)


def test_descendants_come_from_the_kernel_child_lists_as_psutil_finds_them(monkeypatch) -> None:
    script = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
              "time.sleep(30)")
    parents = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(2)]
    try:
        ours: set[int] = set()
        for _ in range(100):  # wait (bounded) until both grandchildren exist
            ours = {p.pid for p in parents} | {child.pid for p in parents
                                               for child in psutil.Process(p.pid).children(recursive=True)}
            if len(ours) == 4:
                break
            time.sleep(0.05)
        assert len(ours) == 4
        if system._descendant_pids(os.getpid()) is None:
            pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children")
        for parent in parents:  # each subtree exactly (the test process may have other children meanwhile)
            assert sorted(system._descendant_pids(parent.pid)) == sorted(
                child.pid for child in psutil.Process(parent.pid).children(recursive=True))
        assert ours <= set(system._descendant_pids(os.getpid()))
        sampler = SystemSampler(writer=None, gpus=False, start=False)
        sampler.sample()
        assert ours <= set(sampler._children)

        def no_child_lists(path: str, *args: object):  # as on a kernel without CONFIG_PROC_CHILDREN: psutil's scan
            raise FileNotFoundError(path)

        monkeypatch.setattr(system, "open", no_child_lists, raising=False)
        assert system._descendant_pids(os.getpid()) is None
        sampler._children.clear()
        sampler._children_read_at = -float("inf")  # the list is read again at most every CHILDREN_EVERY_S
        sampler.sample()
        assert ours <= set(sampler._children)
        sampler.close()
    finally:
        for parent in parents:
            for child in psutil.Process(parent.pid).children(recursive=True):
                child.kill()
            parent.kill()
            parent.wait()


def _wait_until(condition: Callable[[], bool], limit_s: float = 120.0) -> None:
    """Until ``condition()`` holds (a state, bounded: the assertions after it say what did not happen)."""
    deadline = time.monotonic() + limit_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.parametrize("every", [None, 1])
def test_dear_samples_are_spaced_to_keep_within_the_budget_unless_every_is_given(tmp_path: Path, monkeypatch,
                                                                               every: int | None) -> None:
    """What is asserted is how many wake-ups sample (counted), not a share of wall time: on a loaded machine a 3 ms
    sleep returns late by a time slice now and then, and one such sample was a share over budget by itself."""
    cost_s, calls, wakes = 0.003, [0], [0]

    def slow_sample(self: SystemSampler) -> dict[str, float]:  # a slow NVML: 3 ms a sample, every 10 ms
        time.sleep(cost_s)
        calls[0] += 1
        return {}
    account = SystemSampler._account

    def counted(self: SystemSampler, period_ns: int, spent_ns: int, sampled: bool) -> None:
        wakes[0] += 1  # every wake-up is accounted, sampled or not
        account(self, period_ns, spent_ns, sampled)
    monkeypatch.setattr(SystemSampler, "sample", slow_sample)
    monkeypatch.setattr(SystemSampler, "_account", counted)
    with SummaryWriter(tmp_path / "run") as writer:
        sampler = SystemSampler(writer, interval=0.01, gpus=False, budget=0.02, every=every)
        # NOTE: counts, not times: past the warm-up (32 wake-ups) and a few decisions, then 150 wake-ups counted (a
        # loaded machine wakes the thread late, so a fixed sleep held fewer of them); each wait bounded at 120 s
        _wait_until(lambda: sampler.pace.seen_steps >= sampler.pace.warmup_steps + 64)
        calls[0], wakes[0] = 0, 0
        _wait_until(lambda: wakes[0] >= 150)
        sampler.close()
    if every is None:
        # 3 ms per 13 ms wake-up is 23 %: within 2 % (half of it for the timed work) is one wake-up in 30 or more
        assert sampler.pace.interval >= 10, sampler.pace.last
        assert calls[0] <= wakes[0] // 10 + 2, (calls[0], wakes[0])  # (+ close()'s last sample)
    else:
        assert sampler.pace.interval == 1 and wakes[0] >= 10  # every wake-up samples, whatever it costs
        assert wakes[0] - 1 <= calls[0] <= wakes[0] + 1  # (the counters are reset while the thread runs)
    written = {value.tag for event in read_run(tmp_path / "run") for value in event.values}
    assert {"perf/interval/system", "perf/instrumentation_ms/system", "perf/instrumentation_share/system"} <= written
