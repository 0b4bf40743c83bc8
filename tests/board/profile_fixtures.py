"""Log directories holding profile captures: a profiled engine run and a torch.profiler export."""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import engine
import instrumentation
from engine import nn
from engine.nn import functional as F
from instrumentation import SummaryWriter


def profiled_engine_run(run_dir: Path, steps: int = 6, watched: bool = False) -> str:
    """A digits MLP run with event files and one capture of ``steps`` steps; returns the trace path. ``watched``:
    under ``watch(check_numerics=True)`` with a stacks-on memory tracker, started before the profile."""
    engine.manual_seed(0)
    engine.hooks.reset_step()
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    dataset = engine.data.Dataset.from_tensor_slices((x, y)).batch(32)
    with SummaryWriter(run_dir) as writer, ExitStack() as watching:
        if watched:
            watching.enter_context(instrumentation.watch(model, writer, check_numerics=True, memory_stacks=True))
        prof = watching.enter_context(instrumentation.profile(run_dir))
        for step, (xb, yb) in enumerate(dataset):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(xb)), engine.tensor(yb))
            loss.backward()
            optimizer.step()
            writer.add_scalar("loss", float(loss.item()), step)
            if step + 1 == steps:
                break
    return prof.traces_written[0]


def torch_profiler_trace(directory: Path, steps: int = 4, profile_memory: bool = False,
                         keep: list | None = None) -> Path:
    """``torch.profiler`` on a small PyTorch MLP, exported with its TensorBoard handler (``*.pt.trace.json``);
    ``profile_memory`` records torch's ``[memory]`` events; ``keep`` receives the profiler (for key_averages)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    handler = torch.profiler.tensorboard_trace_handler(str(directory), worker_name="worker0")
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                on_trace_ready=handler, record_shapes=True, profile_memory=profile_memory) as prof:
        for _ in range(steps + 1):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            prof.step()
    if keep is not None:
        keep.append(prof)
    return next(Path(directory).glob("*.pt.trace.json*"))


def budgeted_run(run_dir: Path, steps: int = 300, capture_steps: int = 5) -> None:
    """A digits MLP run under ``watch()`` with its default overhead budget (memory tracker included) for ``steps``
    steps, the last ``capture_steps`` of them profiled: pace tags for three observers and one capture."""
    engine.manual_seed(0)
    engine.hooks.reset_step()
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    batches = [(engine.tensor(x[i:i + 32]), engine.tensor(y[i:i + 32])) for i in range(0, len(x) - 32, 32)]
    with SummaryWriter(run_dir) as writer, instrumentation.watch(model, writer, capture_requests=False) as handle, \
            ExitStack() as profiling:
        for step in range(steps):
            if step == steps - capture_steps:
                profiling.enter_context(instrumentation.profile(run_dir))
            engine.hooks.mark_step_begin()
            xb, yb = batches[step % len(batches)]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())


def torch_cnn_trace(directory: Path, steps: int = 3, keep: list | None = None, chrome: bool = False) -> Path:
    """``torch.profiler`` (``with_modules``, ``with_stack``: its ``nn.Module:`` events; ``profile_memory``;
    ``record_shapes``) on a small CNN fed by a ``DataLoader`` whose items are made with torch ops (so the loader's
    own ops show inside its ``enumerate(DataLoader)#…`` spans), written by ``tensorboard_trace_handler`` (or with
    ``chrome``, by ``export_chrome_trace``). ``keep`` receives the profiler (for key_averages)."""
    import torch

    torch.manual_seed(0)

    class Noisy(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64 * (steps + 2)

        def __getitem__(self, i: int):
            generator = torch.Generator().manual_seed(i)
            image = torch.nn.functional.avg_pool2d(torch.randn(1, 1, 56, 56, generator=generator), 2)[0]
            return (image - image.mean()) / image.std(), i % 10

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 14 * 14, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(Noisy(), batch_size=16)
    directory.mkdir(parents=True, exist_ok=True)
    handler = None if chrome else torch.profiler.tensorboard_trace_handler(str(directory), worker_name="cnn")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], on_trace_ready=handler,
                                schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
                                record_shapes=True, profile_memory=True, with_modules=True, with_stack=True) as prof:
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            prof.step()
            if step == steps:
                break
    if keep is not None:
        keep.append(prof)
    if chrome:
        path = directory / "cnn.pt.trace.json"
        prof.export_chrome_trace(str(path))
        return path
    return next(Path(directory).glob("*.pt.trace.json*"))
