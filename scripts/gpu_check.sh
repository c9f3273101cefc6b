#!/usr/bin/env bash
# GPU smoke check for warpgym: run from the repo root on a CUDA machine (torch assumed present).
#   bash scripts/gpu_check.sh
# Installs the project if needed, runs the test suite on CUDA, then the throughput benchmark
# (CUDA graphs are used by default on CUDA; the second benchmark run checks the large batches).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python}"
if ! "$PY" -c "import sim_core, pytest" >/dev/null 2>&1; then
    "$PY" -m pip install -e ".[test]"
fi

echo "== nvidia-smi -L"
nvidia-smi -L

echo "== tests (WARPGYM_TEST_DEVICE=cuda)"
WARPGYM_TEST_DEVICE=cuda "$PY" -m pytest -x -q tests

echo "== benchmark (cuda)"
"$PY" scripts/bench_sim.py --device cuda --skip-compile

echo "== benchmark, large batches (cuda, CUDA graph)"
"$PY" scripts/bench_sim.py --device cuda --n-envs 4096 16384 --skip-compile

echo "== env layer (cuda)"
"$PY" scripts/bench_env.py --device cuda --n-envs 1024 4096 16384
