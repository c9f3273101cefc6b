"""PNG plots for the benchmark scripts (matplotlib, optional: ``pip install -e ".[bench]"``)."""

from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (with a note) where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no PNG (pip install matplotlib)")
        return None
    return plt


def throughput_png(
    path: str,
    n_envs: list[int],
    series: dict[str, list[float]],
    title: str,
    hlines: dict[str, float] | None = None,
) -> None:
    """Env-steps/s against n_envs, log-log, one line per series (ours and the references)."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, values in series.items():
        ax.plot(n_envs, values, marker="o", label=name)
    for name, value in (hlines or {}).items():
        ax.axhline(value, linestyle="--", color="gray", linewidth=1)
        ax.annotate(name, (n_envs[0], value), textcoords="offset points", xytext=(2, 4), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n_envs")
    ax.set_ylabel("env-steps/s")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot saved to {path}")
