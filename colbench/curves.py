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
    names = [n for n in curve_names(steps) if any(isinstance(s.get(n), (int, float)) for s in steps)]
    panels = [(name, {"": [(s["step"], s[name]) for s in steps if isinstance(s.get(name), (int, float))]})
              for name in names]
    return draw(panels, out, title=title)


def draw(panels: list[tuple[str, dict[str, list[tuple[float, float]]]]], out: Path, *, title: str = "",
         marked: frozenset[str] = frozenset()) -> Path:
    """A PNG of one panel per (name, {line label: [(step, value)]}), three to a row; the panels in ``marked`` draw
    their points (figures read every few steps); labelled lines get a legend on the first panel."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    columns = max(1, min(3, len(panels)))
    rows = max(1, -(-len(panels) // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows), squeeze=False)
    for axis, (name, lines) in zip(axes.flat, panels):
        for label, points in lines.items():
            axis.plot([p[0] for p in points], [p[1] for p in points], linewidth=1.2, label=label or None,
                      marker="o" if name in marked else None, markersize=3)
        axis.set_title(name, fontsize=10)
        axis.set_xlabel("step", fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(panels):]:
        axis.set_visible(False)
    if panels and any(label for label in panels[0][1]):
        axes.flat[0].legend(fontsize=7)
    if title:
        figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
