#!/usr/bin/env bash
# GPU check for warpgym: run from the repo root on a CUDA machine (torch assumed present).
#   bash scripts/gpu_check.sh                    # every section, in this order
#   bash scripts/gpu_check.sh tests learn        # some of them (a device lent for a few minutes)
# Sections:
#   tests   the test suite on CUDA (the recorded rollout and env.step replayed against eager ones
#           included), in parallel where pytest-xdist is installed
#   sim     bench_sim against MuJoCo C on every host core and MuJoCo Warp if installed (CUDA
#           graphs), then sim_core with the contact solver's scratch env-major, to compare
#   env     the env layer's throughput
#   train   a short training run with evaluations, play, an export, and a video through EGL
#   learn   the training benchmark: Reach to 95%, Push and Lift to 90% (CUDA graphs on, the default)
# Installs the project if needed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python}"
if ! "$PY" -c "import sim_core, pytest" >/dev/null 2>&1; then
    "$PY" -m pip install -e ".[test]"
fi
SECTIONS=("$@")
[ ${#SECTIONS[@]} -gt 0 ] || SECTIONS=(tests sim env train learn)
RUN=/tmp/warpgym_gpu_run
mkdir -p "$RUN"

echo "== nvidia-smi -L"
nvidia-smi -L

for section in "${SECTIONS[@]}"; do
case "$section" in
tests)
    echo "== tests (WARPGYM_TEST_DEVICE=cuda; NVRTC compiling the generated kernels, 40-55 s per model"
    echo "   on an H200's host, is most of the time)"
    XDIST=()
    if "$PY" -c "import xdist" >/dev/null 2>&1; then XDIST=(-n "$(( $(nproc) > 14 ? 14 : $(nproc) ))"); fi
    WARPGYM_TEST_DEVICE=cuda "$PY" -m pytest -q "${XDIST[@]}" tests || echo "TESTS FAILED (continuing)"
    ;;
sim)
    echo "== sim_core against MuJoCo C on every host core and MuJoCo Warp if installed (CUDA graphs)"
    "$PY" scripts/bench_sim.py --device cuda --skip-compile --n-envs 4096 16384 65536 --mj-nthread "$(nproc)" \
        --repeats 2 --png "$RUN/bench_sim.png"
    echo "== the contact solver's scratch env-major instead of env-minor"
    "$PY" scripts/bench_sim.py --device cuda --skip-compile --scene arm_cube cube_held --n-envs 16384 65536 \
        --gpu-scratch env-major --no-mjwarp --mj-nthread "$(nproc)" --repeats 2 --png ""
    ;;
env)
    echo "== env layer (cuda)"
    "$PY" scripts/bench_env.py --device cuda --n-envs 1024 4096 16384
    ;;
train)
    echo "== training on CUDA (short), then play with a video through EGL"
    "$PY" -m warpgym.training train --device cuda --num-envs 4096 --max-iterations 30 --eval-every 10 \
        --logdir "$RUN"
    "$PY" -m warpgym.training export --checkpoint "$RUN/checkpoints/best.pt" --output "$RUN/policy.pt2"
    "$PY" -m warpgym.training play --device cuda --checkpoint "$RUN/checkpoints/last.pt" --episodes 1000
    "$PY" -m warpgym.training play --device cuda --checkpoint "$RUN/checkpoints/last.pt" --episodes 4 \
        --video "$RUN/policy.mp4" || echo "no video: rendering needs libEGL on a GPU machine"
    ;;
learn)
    echo "== training speed on CUDA: Reach to 95%, then Push and Lift to 90% (deterministic, 512 fresh episodes)"
    "$PY" scripts/bench_train.py --device cuda --png "$RUN/reach.png" train.num_envs=4096
    "$PY" scripts/bench_train.py --device cuda --task WarpGym/FrankaPush-v0 --target 0.9 --episodes 512 \
        --max-time 1 --eval-every 5 --png "$RUN/push.png" train.num_envs=4096
    "$PY" scripts/bench_train.py --device cuda --task WarpGym/FrankaLift-v0 --target 0.9 --episodes 512 \
        --max-time 2 --eval-every 10 --png "$RUN/lift.png" train.num_envs=4096
    ;;
*)
    echo "unknown section: $section (tests, sim, env, train, learn)" >&2
    exit 2
    ;;
esac
done
