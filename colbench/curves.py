"""A training run's per-step figures drawn as a PNG: one panel per figure, against the step."""
from __future__ import annotations

from pathlib import Path

# Figures a curve is drawn for, in this order when present.
CURVES = ("reward", "success", "val_reward", "val_success", "loss", "pair_accuracy", "margin", "reward_margin",
          "reward_accuracy", "nll", "lr", "grad_norm")


def curve_names(steps: list[dict]) -> list[str]:
    present = {key for step in steps for key in step if key not in ("step", "epoch")}
    return [name for name in CURVES if name in present] + sorted(present - set(CURVES))


def plot_steps(steps: list[dict], out: Path, *, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    names = [n for n in curve_names(steps) if any(isinstance(s.get(n), (int, float)) for s in steps)]
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    for axis, name in zip(axes.flat, names):
        points = [(s["step"], s[name]) for s in steps if isinstance(s.get(name), (int, float))]
        axis.plot([p[0] for p in points], [p[1] for p in points], linewidth=1.2)
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("step", fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(names):]:
        axis.set_visible(False)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
