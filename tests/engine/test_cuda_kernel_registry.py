"""Where the CUDA kernels are registered: each ``kernels/<name>.cu`` is a source by being there, a kernel is found by
its name in the source that defines it, and an op (or optimizer) names in ``cuda_kernel`` the source its CuPy branch
launches — checked against what its code really launches (no device needed)."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import engine.ops  # noqa: F401  (every op class is defined)
import engine.optim  # noqa: F401
from engine.backend.cuda import sources
from engine.op import Function
from engine.optim.optimizer import Optimizer

LAUNCHERS = Path(sources.__file__).with_name("kernels.py")


def _subclasses(base: type) -> list[type]:
    found, todo = [], [base]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("engine.") and sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def _launcher_kernels() -> dict[str, set[str]]:
    """Launcher function in engine/backend/cuda/kernels.py -> the kernel names it passes to ``_kernel``."""
    kernels: dict[str, set[str]] = {}
    for function in ast.parse(LAUNCHERS.read_text()).body:
        if isinstance(function, ast.FunctionDef):
            kernels[function.name] = {call.args[0].value for call in ast.walk(function) if isinstance(call, ast.Call)
                                      and getattr(call.func, "id", None) == "_kernel"
                                      and isinstance(call.args[0], ast.Constant)}
    return kernels


def _launched_sources(cls: type) -> set[str]:
    """The kernel sources the class's own code launches through ``engine.backend.cuda.kernels``."""
    launchers = _launcher_kernels()
    called = re.findall(r"\bkernels\.(\w+)\(", inspect.getsource(cls))
    return {sources.entry_sources()[kernel] for name in called for kernel in launchers.get(name, ())}


@pytest.mark.parametrize("cls", _subclasses(Function) + _subclasses(Optimizer), ids=lambda cls: cls.__name__)
def test_an_op_names_the_kernel_source_its_cupy_branch_launches(cls):
    launched = _launched_sources(cls)
    if launched:
        assert launched == {cls.cuda_kernel}, f"{cls.__name__} launches {launched}, declares {cls.cuda_kernel!r}"
    if getattr(cls, "cuda_kernel", None) is not None:
        assert cls.cuda_kernel in sources.source_names()


def test_the_declarations_cover_the_ops_that_launch_kernels():
    declared = {cls.__name__: cls.cuda_kernel for cls in _subclasses(Function) + _subclasses(Optimizer)
                if getattr(cls, "cuda_kernel", None)}
    assert declared == {"CrossEntropy": "softmax_xent", "Conv2d": "im2col", "_Pool2d": "pool", "MaxPool2d": "pool",
                        "AvgPool2d": "pool", "Adam": "adam", "AdamW": "adam"}


@pytest.fixture
def kernel_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "KERNEL_DIR", tmp_path)
    sources.source_names.cache_clear()
    sources.entry_sources.cache_clear()
    yield tmp_path
    sources.source_names.cache_clear()
    sources.entry_sources.cache_clear()


def test_a_new_source_file_is_a_source_and_its_kernels_are_found(kernel_dir):
    (kernel_dir / "scale.cu").write_text('extern "C" __global__ void scale_f32(float* x) { x[0] *= 2; }\n'
                                         'extern "C" __global__ void scale_f64(double* x) { x[0] *= 2; }\n')
    (kernel_dir / "notes.txt").write_text("not a source")
    assert sources.source_names() == ("scale",)
    assert sources.entry_sources() == {"scale": "scale"}
    with pytest.raises(KeyError, match="the engine ships scale"):
        sources.read_source("notes")


def test_a_kernel_defined_in_two_sources_is_refused(kernel_dir):
    for name in ("a", "b"):
        (kernel_dir / f"{name}.cu").write_text('extern "C" __global__ void twice_f32(float* x) {}\n')
    with pytest.raises(RuntimeError, match="'twice' is defined in both a.cu and b.cu"):
        sources.entry_sources()
