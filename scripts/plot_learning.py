#!/usr/bin/env python
"""Deterministic success against env-steps for several ``bench_train.py --json`` runs (one line per
run, e.g. per seed), with the target and the env-step budget marked; env-steps, unlike seconds, do
not depend on the machine or on what else it runs.

    python scripts/plot_learning.py push_s0.json push_s1.json push_s2.json --labels "seed 0" "seed 1" \\
        "seed 2" --title FrankaPush-v0 --target 0.8 --budget 2e6 --png docs/push_curve.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _plots import pyplot


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="JSON files written by bench_train.py --json")
    p.add_argument("--labels", nargs="*", default=None)
    p.add_argument("--title", default="")
    p.add_argument("--target", type=float, default=None)
    p.add_argument("--budget", type=float, default=None, help="env-steps to mark")
    p.add_argument("--png", required=True)
    args = p.parse_args(argv)
    labels = args.labels or [Path(r).stem for r in args.runs]
    if len(labels) != len(args.runs):
        p.error(f"--labels: expected {len(args.runs)} labels, one per run, got {len(labels)}")
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for path, label in zip(args.runs, labels, strict=True):
        rows = json.loads(Path(path).read_text())["rows"]
        steps, success = [r["env_steps"] / 1e6 for r in rows], [r["success_rate"] for r in rows]
        ax.plot(steps, success, marker=".", label=label)
    if args.target is not None:
        ax.axhline(args.target, color="gray", linestyle="--", linewidth=1)
    if args.budget is not None:
        ax.axvline(args.budget / 1e6, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel("env-steps (millions)")
    ax.set_ylabel("deterministic success")
    ax.set_title(args.title)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"curve saved to {args.png}")


if __name__ == "__main__":
    main()
