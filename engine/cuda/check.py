"""``python -m engine.cuda --check``: compile every kernel source, and sample fused elementwise chains as the graph's
fusion generates them (``fused_source.SAMPLES``), with NVRTC for each architecture, no GPU needed.

NVRTC is loaded with ctypes from the ``nvidia-cuda-nvrtc`` wheel (``pip install 'flowscope[cuda]'``, also in the
test extra), else from the system CUDA toolkit. Compiling to a cubin for a real architecture runs the whole compiler
(front end and ptxas), which a driver and a device are not needed for.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from engine.backend.cuda.fused_source import sample_sources
from engine.backend.cuda.sources import CHECK_ARCHITECTURES, CUPY_ADDED_OPTIONS, OPTIONS, read_source, source_names

_WHEEL_LIBRARIES = ("cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12")
_SYSTEM_LIBRARIES = ("/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13")


@dataclass(frozen=True, slots=True)
class CompileResult:
    kernel: str
    arch: str
    ok: bool
    log: str  # the compiler's messages (warnings too); empty when it said nothing

    def line(self) -> str:
        return f"{self.kernel} {self.arch} {'ok' if self.ok else 'error'}"


def find_nvrtc() -> str:
    """The path of an NVRTC shared library: the pip wheel's first, then the system toolkit's."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for relative in _WHEEL_LIBRARIES:
            if (Path(root) / relative).exists():
                return str(Path(root) / relative)
    for candidate in _SYSTEM_LIBRARIES:
        if Path(candidate).exists():
            return candidate
    found = ctypes.util.find_library("nvrtc")
    if found:
        return found
    raise RuntimeError("NVRTC not found: pip install 'flowscope[cuda]' (the nvidia-cuda-nvrtc wheel) or install the "
                       "CUDA toolkit")


class Nvrtc:
    """The few NVRTC calls the check needs, through ctypes."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or find_nvrtc()
        self.lib = ctypes.CDLL(self.path)

    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return f"{major.value}.{minor.value}"

    def _error(self, code: int) -> str:
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return self.lib.nvrtcGetErrorString(code).decode()

    def compile(self, kernel: str, text: str, arch: str,
                options: Sequence[str] = OPTIONS + CUPY_ADDED_OPTIONS) -> CompileResult:
        program = ctypes.c_void_p()
        code = self.lib.nvrtcCreateProgram(ctypes.byref(program), text.encode(), f"{kernel}.cu".encode(), 0, None,
                                           None)
        if code != 0:
            return CompileResult(kernel, arch, False, f"nvrtcCreateProgram: {self._error(code)}")
        try:
            flags = [f"--gpu-architecture={arch}", *options]
            array = (ctypes.c_char_p * len(flags))(*[flag.encode() for flag in flags])
            code = self.lib.nvrtcCompileProgram(program, len(flags), array)
            size = ctypes.c_size_t()
            self.lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            self.lib.nvrtcGetProgramLog(program, log)
            text_log = log.value.decode(errors="replace").strip()
            if code != 0:
                return CompileResult(kernel, arch, False, text_log or self._error(code))
            cubin = ctypes.c_size_t()
            if self.lib.nvrtcGetCUBINSize(program, ctypes.byref(cubin)) != 0 or cubin.value == 0:
                return CompileResult(kernel, arch, False, text_log or "no cubin produced")
            return CompileResult(kernel, arch, True, text_log)
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(program))


def check(extra_sources: Sequence[Path] = (), architectures: Sequence[str] = CHECK_ARCHITECTURES,
          nvrtc: Nvrtc | None = None) -> list[CompileResult]:
    """Compile the engine's kernel sources, the sample fused chains and ``extra_sources`` for every architecture."""
    nvrtc = nvrtc or Nvrtc()
    sources = [(name, read_source(name)) for name in source_names()] + sample_sources()
    sources += [(Path(path).stem, Path(path).read_text(encoding="utf-8")) for path in extra_sources]
    return [nvrtc.compile(name, text, arch) for name, text in sources for arch in architectures]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.cuda", description="CUDA tools of the engine")
    parser.add_argument("--check", action="store_true", help="compile every kernel source with NVRTC (no GPU needed)")
    parser.add_argument("--arch", action="append", help=f"architecture to compile for (default: "
                        f"{' '.join(CHECK_ARCHITECTURES)}); repeat for several")
    parser.add_argument("--source", action="append", default=[], type=Path,
                        help="also compile this .cu file (repeatable)")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    try:
        nvrtc = Nvrtc()
    except (RuntimeError, OSError) as error:
        print(f"cannot compile: {error}", file=sys.stderr)
        return 2
    print(f"nvrtc {nvrtc.version()} from {nvrtc.path}", file=sys.stderr)
    results = check(args.source, tuple(args.arch or CHECK_ARCHITECTURES), nvrtc)
    for result in results:
        print(result.line())
        if not result.ok:
            print("\n".join("    " + line for line in result.log.splitlines()))
    return 0 if all(result.ok for result in results) else 1
