#!/usr/bin/env bash
# GPU smoke check for warpgym: run from the repo root on a CUDA machine (torch assumed present).
#   bash scripts/gpu_check.sh
# Installs the project if needed, runs the test suite on CUDA (the recorded rollout and env.step
# replayed against eager ones included), the throughput benchmarks, a short training run with a
# video (EGL) and the training benchmark of Reach, Push and Lift (CUDA graphs on, the default).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python}"
if ! "$PY" -c "import sim_core, pytest" >/dev/null 2>&1; then
    "$PY" -m pip install -e ".[test]"
fi

echo "== nvidia-smi -L"
nvidia-smi -L

echo "== tests (WARPGYM_TEST_DEVICE=cuda; in parallel where pytest-xdist is installed: NVRTC compiling"
echo "   the generated kernels, 40-55 s per model on an H200's host, is most of the time)"
XDIST=()
if "$PY" -c "import xdist" >/dev/null 2>&1; then XDIST=(-n "$(( $(nproc) > 14 ? 14 : $(nproc) ))"); fi
WARPGYM_TEST_DEVICE=cuda "$PY" -m pytest -q "${XDIST[@]}" tests || echo "TESTS FAILED (continuing)"

echo "== benchmark, against MuJoCo C on every core of this machine and MuJoCo Warp if installed (CUDA graphs)"
"$PY" scripts/bench_sim.py --device cuda --skip-compile --n-envs 4096 16384 65536 --mj-nthread "$(nproc)" \
    --repeats 2 --png ""

echo "== the contact solver's scratch env-major instead of env-minor (sim_core only, arm_cube and cube_held)"
"$PY" scripts/bench_sim.py --device cuda --skip-compile --scene arm_cube cube_held --n-envs 16384 65536 \
    --gpu-scratch env-major --no-mjwarp --repeats 2 --png ""

echo "== env layer (cuda)"
"$PY" scripts/bench_env.py --device cuda --n-envs 1024 4096 16384

echo "== training on CUDA (short), then play with a video through EGL"
"$PY" -m warpgym.training train --device cuda --num-envs 4096 --max-iterations 30 --logdir /tmp/warpgym_gpu_run
"$PY" -m warpgym.training play --device cuda --checkpoint /tmp/warpgym_gpu_run/checkpoints/last.pt --episodes 1000
"$PY" -m warpgym.training play --device cuda --checkpoint /tmp/warpgym_gpu_run/checkpoints/last.pt --episodes 4 \
    --video /tmp/warpgym_gpu_run/policy.mp4 || echo "no video: rendering needs libEGL on a GPU machine"

echo "== training speed on CUDA: Reach to 95%, then Push and Lift to 90% (deterministic, 512 fresh episodes)"
"$PY" scripts/bench_train.py --device cuda --png /tmp/warpgym_gpu_run/reach.png train.num_envs=4096
"$PY" scripts/bench_train.py --device cuda --task WarpGym/FrankaPush-v0 --target 0.9 --episodes 512 \
    --max-time 1 --eval-every 5 --png /tmp/warpgym_gpu_run/push.png train.num_envs=4096
"$PY" scripts/bench_train.py --device cuda --task WarpGym/FrankaLift-v0 --target 0.9 --episodes 512 \
    --max-time 2 --eval-every 10 --png /tmp/warpgym_gpu_run/lift.png train.num_envs=4096
