"""Shorten the busy-wait of torch's idle OpenMP workers before torch is imported.

GNU OpenMP (libgomp, the OpenMP runtime of torch's Linux builds) lets a worker that has finished a
parallel region spin for ``GOMP_SPINCOUNT`` iterations before it sleeps: 300,000 by default, a few
milliseconds. A CPU scene steps on host threads of its own (``host_threads``), one per core, so
workers still spinning after a parallel torch op (a PPO update on every core, a batched critic)
take cores from the next steps and slow them down (docs/performance.md, "Training rollouts against
the bare env"). At 1,000 iterations (microseconds) a worker still stays awake between the
consecutive ops of one computation, so the PPO update runs as fast.

libgomp reads the variable once, as torch loads it, so it is set on import of this package, and only
when the user chose no OpenMP wait behaviour (``GOMP_SPINCOUNT`` and ``OMP_WAIT_POLICY`` unset) and
torch is not imported yet. Timing alone changes, never results.
"""

import os
import sys

SPIN_COUNT = "1000"

if not {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"} & os.environ.keys() and "torch" not in sys.modules:
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
