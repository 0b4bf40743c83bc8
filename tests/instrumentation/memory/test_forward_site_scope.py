"""A top-level call of a model made only of engine modules walks the stack once (Module._call_in_site_scope): each
forward buffer gets the site its own walk would find; a user's module, forward hook or instance forward inside
turns that off, so their lines are still the sites of what they allocate."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks, memory
from engine.nn import module as module_file

walks: list[int] = []


class _UserLayer(engine.nn.Module):
    def forward(self, x):
        return (x * 2.0).relu()  # the user's forward line


def _model(kind: str) -> engine.nn.Module:
    engine.manual_seed(0)
    layers = [engine.nn.Linear(5, 4), engine.nn.ReLU(), engine.nn.Linear(4, 3)]
    if kind == "user layer":
        layers.insert(2, _UserLayer())
    model = engine.nn.Sequential(*layers)
    if kind == "forward hook":
        model[1].register_forward_hook(lambda module, inputs, out: out * 1.0)
    return model


def _forward_sites(make_tracker, kind: str, scoped: bool, monkeypatch) -> tuple[list, int]:
    monkeypatch.undo()
    if not scoped:  # every allocation walks the stack itself
        monkeypatch.setattr(module_file.Module, "_runs_engine_code_only", lambda self: False)
    tracker = make_tracker(stacks=True, leak=None)
    model = _model(kind)
    x = engine.tensor(np.ones((2, 5), np.float32))
    site_of = hooks.allocation_site
    calls = [0]

    def counting():
        calls[0] += 1
        return site_of()

    monkeypatch.setattr(hooks, "allocation_site", counting)
    before = {block.buffer_id for block in memory.live_blocks()}
    out = model(x)  # the model's call line
    monkeypatch.setattr(hooks, "allocation_site", site_of)
    # the innermost frame (outer ones differ: the two runs are called from different lines of the test)
    sites = sorted((block.op, block.shape, block.site[:1]) for block in memory.live_blocks()
                   if block.buffer_id not in before)
    del out
    tracker.close()
    return sites, calls[0]


def test_an_engine_only_model_walks_once_and_every_buffer_gets_the_site_its_walk_finds(make_tracker,
                                                                                       monkeypatch) -> None:
    walked, walks_each = _forward_sites(make_tracker, "engine", False, monkeypatch)
    scoped, walks_once = _forward_sites(make_tracker, "engine", True, monkeypatch)
    assert scoped == walked and len(scoped) >= 3
    assert all("model's call line" in open(__file__).read().splitlines()[int(site[0].split(":")[1].split()[0]) - 1]
               for _, _, site in scoped)
    assert walks_once == 1 and walks_each >= 3


def test_a_user_layer_or_a_forward_hook_keeps_each_allocation_s_own_walk(make_tracker, monkeypatch) -> None:
    for kind in ("user layer", "forward hook"):
        walked, _ = _forward_sites(make_tracker, kind, False, monkeypatch)
        scoped, walks = _forward_sites(make_tracker, kind, True, monkeypatch)
        assert scoped == walked and walks > 1, kind
    sites = {site[0] for _, _, site in _forward_sites(make_tracker, "user layer", True, monkeypatch)[0]}
    assert any(site.endswith("forward") for site in sites)  # the user's forward line is a site


def test_an_instance_forward_turns_the_scope_off() -> None:
    model = _model("engine")
    assert model._runs_engine_code_only()
    model[0].forward = lambda x: x
    assert not model._runs_engine_code_only()
