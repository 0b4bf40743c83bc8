"""``python -m engine.cuda --check`` compiles every kernel source and the sample fused elementwise chains with NVRTC for
sm_80 and sm_90, without a GPU."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.backend.cuda.fused_source import SAMPLES
from engine.backend.cuda.sources import CHECK_ARCHITECTURES, entry_sources, source_names

SOURCES = source_names()

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cuda", "--check", *args], cwd=ROOT, capture_output=True,
                          text=True)


def test_every_kernel_source_compiles_for_each_architecture():
    done = _run()
    assert done.returncode == 0, done.stdout + done.stderr
    expected = [f"{name} {arch} ok" for name in (*SOURCES, *SAMPLES) for arch in CHECK_ARCHITECTURES]
    assert done.stdout.splitlines() == expected
    assert CHECK_ARCHITECTURES == ("sm_80", "sm_90")
    assert all((ROOT / "engine/backend/cuda/kernels" / f"{name}.cu").is_file() for name in SOURCES)


def test_a_broken_source_prints_the_compiler_error_and_fails(tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void broken(float* x) { x[0] = undeclared_name; }\n')
    done = _run("--source", str(broken), "--arch", "sm_90")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "broken sm_90 error" in lines and "adam sm_90 ok" in lines
    assert "undeclared_name" in done.stdout and "identifier" in done.stdout  # NVRTC's own message


def test_check_compiles_the_kernels_it_launches():
    """Every ``extern "C"`` kernel the launchers ask for is defined in the sources that the check compiles."""
    launched = set()
    text = (ROOT / "engine/backend/cuda/kernels.py").read_text()
    for line in text.splitlines():
        if "_kernel(\"" in line:
            launched.add(line.split("_kernel(\"", 1)[1].split("\"", 1)[0])
    sources = "".join((ROOT / "engine/backend/cuda/kernels" / f"{name}.cu").read_text() for name in SOURCES)
    assert launched and launched <= set(entry_sources())
    for name in launched:
        assert f"void {name}_f32(" in sources and f"void {name}_f64(" in sources, name
        assert f"void {name}_f32(" in (ROOT / "engine/backend/cuda/kernels" / f"{entry_sources()[name]}.cu").read_text()
