#!/usr/bin/env bash
# The whole GPU check in one command on a CUDA machine (Python 3.12 with cupy-cuda13x, torch, numpy, scipy,
# scikit-learn, protobuf, psutil, tqdm, nvidia-ml-py; nothing fetched there):
#   bash bench/gpu_check.sh [LOGDIR]          (default LOGDIR: logs/gpu-check; takes a few minutes)
# 1. python -m engine.cuda --check (NVRTC compile of every kernel for sm_80/sm_90)
# 2. pytest tests/gpu (kernels, ops, training, memory, profiler on the device)
# 3. bench/gpu_step.py (engine vs torch CUDA step; fused kernels vs unfused CuPy) -> LOGDIR/gpu_step.json
# 4. bench/gpu_logged_run.py: a run directory with a GPU profile, memory timeline and NVML samples
# Python packages the engine and instrumentation import that such a machine lacks (google-crc32c, orjson) are
# installed from wheels in .whl/ (ignored by git). Fill it where pip reaches PyPI: bash bench/gpu_check.sh --wheels
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WHEELS=(google-crc32c==1.7.1 orjson==3.11.3)

if [[ "${1:-}" == "--wheels" ]]; then
  mkdir -p .whl
  for wheel in "${WHEELS[@]}"; do
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .whl "$wheel" || exit 1
  done
  ls .whl
  exit 0
fi

LOGDIR=${1:-logs/gpu-check}
mkdir -p "$LOGDIR"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/flowscope-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/flowscope-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
status=0
run() {  # run NAME SECONDS COMMAND...: its output to the terminal and LOGDIR/NAME.log; the first failure sets status
  local name=$1 seconds=$2
  shift 2
  echo "== $name"
  timeout "$seconds" "$@" 2>&1 | tee "$LOGDIR/$name.log"
  local rc=${PIPESTATUS[0]}
  [[ $rc -ne 0 ]] && echo "== $name failed (exit $rc)" && status=1
  return 0
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$LOGDIR/gpu.csv" 2>&1
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw,temperature.gpu --format=csv -lms 500 \
  > "$LOGDIR/nvidia-smi-samples.csv" 2>/dev/null &
sampler=$!
run compile_check 60 "$PYTHON" -m engine.cuda --check
run gpu_tests 200 "$PYTHON" -m pytest tests/gpu -q -p no:cacheprovider -rs
run gpu_step 120 "$PYTHON" bench/gpu_step.py --json "$LOGDIR/gpu_step.json"
run logged_run 60 "$PYTHON" bench/gpu_logged_run.py --logdir "$LOGDIR" --steps 300
kill "$sampler" 2>/dev/null
echo "== logs in $LOGDIR"; ls -R "$LOGDIR" | head -40
exit $status
