"""Policy videos: frames of a short deterministic rollout, written as MP4 (imageio + ffmpeg) or put into
TensorBoard as an animated GIF."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

__all__ = ["rollout_frames", "write_video", "add_video_to_tensorboard"]


def _imageio():
    try:
        import imageio.v2 as imageio
    except ImportError as e:
        raise RuntimeError('videos need imageio and imageio-ffmpeg: pip install -e ".[render]"') from e
    return imageio


@torch.inference_mode()
def rollout_frames(
    policy: Callable[[torch.Tensor], torch.Tensor], env, steps: int, seed: int
) -> list[np.ndarray]:
    """Reset ``env`` (``render_mode="rgb_array"``) with ``seed`` and render every control step of
    ``policy`` for ``steps`` steps (or until every rendered env's first episode ended)."""
    obs, _ = env.reset(seed=seed)
    frames = [env.render()]
    watched = torch.as_tensor(env.unwrapped.render_envs_idx, device=obs.device)
    ended = torch.zeros(len(watched), dtype=torch.bool, device=obs.device)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        frames.append(env.render())
        ended |= (terminated | truncated)[watched]
        if bool(ended.all()):
            break
    return frames


def write_video(path: str | Path, frames: list[np.ndarray], fps: int) -> None:
    """H.264 MP4 (or any format imageio knows from the suffix)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    _imageio().mimwrite(str(path), frames, fps=fps, macro_block_size=1)


def add_video_to_tensorboard(writer, tag: str, frames: list[np.ndarray], step: int, fps: int) -> None:
    """An animated GIF in TensorBoard's Images tab, as ``SummaryWriter.add_video`` writes it.

    ``add_video`` itself encodes with ``moviepy.editor``, which moviepy 2 no longer has (it prints a
    message and writes no image), so the GIF is encoded here with imageio and the image summary
    goes through the writer's public ``file_writer.add_summary``."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    if writer.file_writer is None:
        raise ValueError("add_video_to_tensorboard: the SummaryWriter is closed")
    buf = io.BytesIO()
    _imageio().mimwrite(buf, frames, format="GIF", duration=1000 / fps, loop=0)
    h, w = frames[0].shape[:2]
    image = Summary.Image(height=h, width=w, colorspace=3, encoded_image_string=buf.getvalue())
    writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)
