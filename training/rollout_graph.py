"""A rollout's steps recorded once into a CUDA graph and replayed at every later rollout.

One rollout step (normalize, the actor's forward pass, sampling, ``env.step`` with its masked
resets, the storage writes) is some sixty small kernels; launched one by one from Python they cost
a GPU more time than they run. ``RolloutGraph.capture`` records a function that runs all
``num_steps`` steps into one ``torch.cuda.CUDAGraph``, torch's ops and Warp's launches on one
capture stream (Warp told that the capture is open, so the scene's step launches its kernels into
it instead of replaying its own graph), and ``replay`` launches the whole rollout at once.

A replay reads and writes the memory the capture saw: the caller keeps the function's inputs (the
policy's parameters, the first observation) in the same tensors and refreshes them in place before
each replay, and every tensor the function allocates is the graph's own. Nothing runs while the
function is recorded: the rollout it describes runs at the first replay.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import warp as wp

__all__ = ["RolloutGraph"]


class RolloutGraph:
    """``capture(fn)`` once, then ``replay()`` as often as needed; CUDA only."""

    def __init__(self, device: torch.device):
        if device.type != "cuda":
            raise ValueError(f"device: a CUDA graph needs a CUDA device, got {device}")
        self.device = device
        self._graph: torch.cuda.CUDAGraph | None = None

    @property
    def captured(self) -> bool:
        return self._graph is not None

    def capture(self, fn: Callable[[], None]) -> None:
        """Record ``fn()``; it must not read device memory on the host (``tests/host_sync.py``)."""
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream(self.device)
        wp_stream = wp.stream_from_torch(stream)
        # thread_local: the capture refuses unsafe calls of this thread only, as Warp assumes
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            with (
                wp.ScopedStream(wp_stream, sync_enter=False),
                wp.ScopedCapture(stream=wp_stream, external=True),
            ):
                fn()
        self._graph = graph

    def replay(self) -> None:
        """Run the recorded rollout on torch's current stream."""
        if self._graph is None:
            raise RuntimeError("RolloutGraph.replay: nothing captured yet")
        self._graph.replay()
