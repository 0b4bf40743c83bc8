"""Check SystemSampler against the real NVML on a GPU machine: `python bench/nvml_check.py` (exit 0 = all good).

Needs an NVIDIA driver and nvidia-ml-py. Allocates a little GPU memory with CuPy when it is installed (so this
process appears in NVML's process list), samples for a few seconds and compares the sampler's readings with
`nvidia-smi --query-gpu` when that tool is on PATH. On a machine without a GPU it prints why and exits 2."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time

from instrumentation import SummaryWriter, SystemSampler
from instrumentation.system import open_nvml


def _nvidia_smi() -> list[dict[str, float]]:
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.total,temperature.gpu",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True).stdout
    return [{"mem_used_mib": float(a), "mem_total_mib": float(b), "temperature_c": float(c)}
            for a, b, c in (line.split(",") for line in out.strip().splitlines())]


def main() -> int:
    reader, status = open_nvml()
    print(status)
    if reader is None:
        return 2
    reader.close()
    held = None
    try:
        import cupy

        held = cupy.ones(64 << 20, dtype=cupy.uint8)  # 64 MiB on GPU 0
        cupy.cuda.Device(0).synchronize()
    except Exception as error:  # noqa: BLE001 - optional: without CuPy the per-process figure is 0
        print(f"(no CuPy allocation: {type(error).__name__}: {error})")
    problems = []
    with SummaryWriter(tempfile.mkdtemp(prefix="nvml_check_")) as writer:
        sampler = SystemSampler(writer, interval=0.2)
        time.sleep(2.0)
        values = sampler.sample()
        sampler.close()
    gpus = sorted({tag.split("/")[1] for tag in values if tag.startswith("sys/gpu")})
    print(f"{len(gpus)} GPU(s): " + ", ".join(gpus))
    for tag in sorted(values):
        print(f"  {tag:36s} {values[tag]:,.1f}")
    for index, smi in enumerate(_nvidia_smi()):
        total = values.get(f"sys/gpu{index}/mem_total_bytes", 0) / 2**20
        if abs(total - smi["mem_total_mib"]) > 1:
            problems.append(f"gpu{index}: total memory {total:.0f} MiB vs nvidia-smi {smi['mem_total_mib']:.0f} MiB")
        temperature = values.get(f"sys/gpu{index}/temperature_c")
        if temperature is None or abs(temperature - smi["temperature_c"]) > 5:
            problems.append(f"gpu{index}: temperature {temperature} vs nvidia-smi {smi['temperature_c']}")
    if held is not None and values.get("sys/gpu0/process_mem_bytes", 0) < 64 << 20:
        reported = values.get("sys/gpu0/process_mem_bytes")
        problems.append(f"gpu0: this process holds >= 64 MiB but NVML reports {reported}")
    for metric in ("mem_used_bytes", "mem_total_bytes", "util_percent"):
        if gpus and f"sys/{gpus[0]}/{metric}" not in values:
            problems.append(f"{gpus[0]}: {metric} missing")
    print("OK" if not problems else "PROBLEMS:\n  " + "\n  ".join(problems))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
