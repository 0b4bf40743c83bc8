"""The live-tensors table of a snapshot (largest first) and the allocator summary line."""
from __future__ import annotations

from dash import html

from instrumentation.format.memory_snapshot import EVALUATION, TRAINING, MemorySnapshot
from instrumentation.format.units import format_bytes

MAX_ROWS = 300


def _bytes(count: float | None) -> str:
    return "—" if count is None else format_bytes(count)


def allocator_summary(snapshot: MemorySnapshot) -> html.Div:
    a = snapshot.allocator
    phase = {EVALUATION: "taken during an evaluation (gradients off), not a training step",
             TRAINING: "taken during training"}.get(snapshot.phase)  # NOTE: longer than PHASE_WORDS: a sentence
    parts = [f"device {snapshot.device}", f"reason {snapshot.reason}", f"step {snapshot.step}",
             f"allocated {_bytes(a.allocated)}", *([phase] if phase else []),
             f"highest allocated up to then {_bytes(a.peak)}", f"limit {_bytes(a.limit)}",
             f"largest free block {_bytes(a.largest_free_block)}", f"fragmentation {a.fragmentation:.0%}",
             f"{len(snapshot.blocks)} live blocks"]
    if snapshot.requested is not None:
        parts.insert(3, f"requested {_bytes(snapshot.requested.bytes)} by {snapshot.requested.op or '?'} in "
                        f"{snapshot.requested.module or 'top level'}")
    return html.Div(" · ".join(parts), className="fs-note", id="memory-allocator")


def live_tensors_table(snapshot: MemorySnapshot) -> html.Div:
    """The blocks, largest first; the allocation-stack column only when the snapshot recorded stacks (else a note
    says how to record them)."""
    stacks = any(b.stack for b in snapshot.blocks)
    headers = ["size", "shape", "dtype", "category", "op", "module", "allocated at step"]
    if stacks:
        headers.append("allocation stack (innermost first)")
    rows = []
    for b in snapshot.blocks[:MAX_ROWS]:
        cells = [html.Td(_bytes(b.bytes)), html.Td(str(list(b.shape))), html.Td(b.dtype), html.Td(b.category),
                 html.Td(b.op), html.Td(b.module), html.Td(str(b.step))]
        if stacks:
            cells.append(html.Td(html.Code(" ← ".join(b.stack)) if b.stack else ""))
        rows.append(html.Tr(cells))
    more = len(snapshot.blocks) - MAX_ROWS
    return html.Div([
        html.Table(className="fs-table", id="memory-blocks", children=[
            html.Thead(html.Tr([html.Th(h) for h in headers])), html.Tbody(rows)]),
        html.Div(f"… {more} smaller blocks not shown", className="fs-note") if more > 0 else html.Div(),
        html.Div() if stacks else html.Div(
            "no allocation stacks in this snapshot: record them with MemoryTracker(writer, stacks=True) or "
            "watch(..., memory_stacks=True)", className="fs-note", id="memory-no-stacks"),
    ])
