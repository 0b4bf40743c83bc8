"""The MLP training steps the profiler benches measure: one definition for the engine, its PyTorch twin, and the rows.

A row is ``(width, batch)``: ``Linear(64, width) ReLU Linear(width, width) ReLU Linear(width, 10)`` on the 8x8
digits, cross-entropy, Adam (lr 1e-3), ``batch`` samples per step. ``DIGITS`` is the older one-hidden-layer form
(``Linear(64, 128) ReLU Linear(128, 10)``, batch 32) that earlier figures were measured on.
"""
from __future__ import annotations

from typing import Any, Callable

WIDTHS = (64, 128, 256, 512)
BATCHES = (32, 64, 128)
ROWS = tuple((width, batch) for width in WIDTHS for batch in BATCHES)
DIGITS = None  # the row value naming the older one-hidden-layer digits MLP


def _sizes(row: tuple[int, int] | None) -> tuple[list[int], int]:
    """Layer sizes and batch of ``row``."""
    if row is DIGITS:
        return [64, 128, 10], 32
    width, batch = row
    return [64, width, width, 10], batch


def engine_step(row: tuple[int, int] | None) -> Callable[[], None]:
    """One training step of the engine's MLP of ``row`` (it opens the engine's step first, as a data loader does)."""
    import engine
    from engine import hooks, nn
    from engine.nn import functional as F

    engine.manual_seed(0)
    sizes, batch = _sizes(row)
    (x, y), _ = engine.datasets.load_digits(0)
    layers: list[Any] = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = engine.tensor(x[:batch]), engine.tensor(y[:batch])

    def step() -> None:
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()
    return step


def torch_step(torch: Any, row: tuple[int, int] | None) -> Callable[[], None]:
    """The same step in PyTorch (the peer the profilers are compared on)."""
    import engine

    torch.manual_seed(0)
    sizes, batch = _sizes(row)
    (x, y), _ = engine.datasets.load_digits(0)
    layers: list[Any] = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = torch.from_numpy(x[:batch]), torch.from_numpy(y[:batch])

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()
    return step


def parse_row(text: str) -> tuple[int, int] | None:
    """``"64x32"`` -> (64, 32); ``"digits"`` -> DIGITS."""
    if text == "digits":
        return DIGITS
    width, batch = text.split("x")
    return int(width), int(batch)


def row_name(row: tuple[int, int] | None) -> str:
    return "digits" if row is DIGITS else f"{row[0]}x{row[1]}"
