"""A study's online arms, step by step: what `colbench experiment --label` keeps of each online run, and what
`colbench study report` makes of it (the diagnostics table and the curves).

``steps.jsonl``: one line per online step of every online arm a study trained: ``arm``, ``label``, ``seed`` (the
training seed), ``run_id``, ``step``, and every figure the run stored for that step (docs/training.md, "Per step":
reward, success, val_success, entropy, the mismatch figures, groups_with_spread, agent_turns_per_dialogue, sim_leak,
the time split ...). A run recorded again replaces its own lines only, as ``study.record`` does.
"""
from __future__ import annotations

from pathlib import Path

STEPS = "steps.jsonl"
# The figures the curves draw, one panel each, every run a line: what the plan's diagnostics name.
CURVES = ("reward", "val_success", "entropy", "mismatch_mean", "zero_spread", "agent_turns_per_dialogue",
          "sim_leak", "clip_fraction")


def run_steps(db, run_id: int) -> list[dict]:
    """A training run's stored per-step figures, as `colbench runs show --json` gives them."""
    from colbench.runs import step_rows

    with db.read() as session:
        return step_rows(session, run_id)


def record_steps(folder: Path, arm: str, label: str, seed: int, run_id: int, steps: list[dict]) -> None:
    """Replace ``arm``/``label``'s lines at training ``seed`` in the folder's steps file with ``steps``."""
    from colbench.jsonl import replace_rows

    folder.mkdir(parents=True, exist_ok=True)
    replace_rows(folder / STEPS, lambda r: r["arm"] == arm and r["label"] == label and r.get("seed", 0) == seed,
                 [{"arm": arm, "label": label, "seed": seed, "run_id": run_id} | step for step in steps])


def _runs(rows: list[dict]) -> dict[tuple[str, str, int], list[dict]]:
    """Each run's steps by (arm, label, seed). A run read under two labels (trained for validation, read again on the
    final split) is recorded under each: it is one run, under its labels joined ("val, final"), its steps once."""
    labels: dict[tuple, list[str]] = {}
    steps: dict[tuple, dict[int, dict]] = {}
    for row in rows:
        run = (row["arm"], row.get("seed", 0), row.get("run_id", row["label"]))
        if row["label"] not in labels.setdefault(run, []):
            labels[run].append(row["label"])
        steps.setdefault(run, {}).setdefault(row["step"], row)
    return {(arm, ", ".join(labels[(arm, seed, run_id)]), seed): [found[k] for k in sorted(found)]
            for (arm, seed, run_id), found in steps.items()}


def _figure(step: dict, name: str) -> float | None:
    if name == "zero_spread":  # the share of groups whose dialogues all got one reward: no gradient from them
        spread = step.get("groups_with_spread")
        return None if spread is None else 1.0 - spread
    value = step.get(name)
    return float(value) if isinstance(value, (int, float)) else None


def _mean(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summary(rows: list[dict]) -> list[dict]:
    """Per online run (arm, label, training seed): its size, and each diagnostic the plan names over its steps. The
    reward's first and last figures are means over a fifth of the steps each (one step's 16 dialogues say little);
    the entropy's peak is against its first step's (the collapse guard's ratio)."""
    found = []
    for (arm, label, seed), steps in _runs(rows).items():
        fifth = max(1, len(steps) // 5)
        entropy = [_figure(s, "entropy") for s in steps]
        validation = [(s["step"], s["val_success"]) for s in steps if s.get("val_success") is not None]
        first_entropy = entropy[0]
        found.append({
            "arm": arm, "label": label, "seed": seed, "steps": len(steps),
            "dialogues": sum(int(s.get("dialogues") or 0) for s in steps),
            "reward_first": _mean([_figure(s, "reward") for s in steps[:fifth]]),
            "reward_last": _mean([_figure(s, "reward") for s in steps[-fifth:]]),
            "val_success": validation[-1][1] if validation else None,
            "val_step": validation[-1][0] if validation else None,
            "entropy_first": first_entropy,
            "entropy_last": entropy[-1],
            "entropy_peak_ratio": (max(e for e in entropy if e is not None) / first_entropy
                                   if first_entropy else None),
            "mismatch_mean": _mean([_figure(s, "mismatch_mean") for s in steps]),
            "mismatch_max": max((v for s in steps if (v := _figure(s, "mismatch_max")) is not None), default=None),
            "zero_spread": _mean([_figure(s, "zero_spread") for s in steps]),
            "agent_turns": _mean([_figure(s, "agent_turns_per_dialogue") for s in steps]),
            "sim_leak": _mean([_figure(s, "sim_leak") for s in steps]),
            # what valuing a step's turns cost (the credit's models): about 0 for a run without turn credit
            "credit_s": _mean([_figure(s, "credit_s") for s in steps]),
            "minutes": sum(_figure(s, "step_s") or 0.0 for s in steps) / 60,
        })
    return found


def _cell(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(found: list[dict]) -> str:
    """The online runs' diagnostics as one Markdown table."""
    lines = ["", "**Online runs, from their stored steps** (reward: mean of the first and of the last fifth of the"
             " steps; validation: the last in-run read; mismatch: |log π_old − log π_sampler| per token; zero spread:"
             " the share of groups with one reward; leak: the share of dialogues whose human handed over the"
             " reference; credit: seconds a step spent valuing turns)", "",
             "| arm | label | seed | steps | dialogues | reward first → last | validation (step) | entropy first → last"
             " (peak ×) | mismatch mean / max | zero spread | agent turns | leak | credit s/step | minutes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in found:
        validation = "–" if run["val_success"] is None else f"{run['val_success']:.1%} ({run['val_step']})"
        lines.append(
            f"| {run['arm']} | {run['label']} | {run['seed']} | {run['steps']} | {run['dialogues']} |"
            f" {_cell(run['reward_first'], '.3f')} → {_cell(run['reward_last'], '.3f')} | {validation} |"
            f" {_cell(run['entropy_first'], '.3f')} → {_cell(run['entropy_last'], '.3f')}"
            f" ({_cell(run['entropy_peak_ratio'], '.2f')}) |"
            f" {_cell(run['mismatch_mean'], '.2g')} / {_cell(run['mismatch_max'], '.2g')} |"
            f" {_cell(run['zero_spread'], '.0%')} | {_cell(run['agent_turns'], '.2f')} |"
            f" {_cell(run['sim_leak'], '.0%')} | {_cell(run['credit_s'], '.1f')} | {run['minutes']:.0f} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], out: Path) -> Path:
    """Every online run's curves in one PNG: a panel per diagnostic, a line per run."""
    from colbench.curves import draw

    runs = _runs(rows)
    panels = [(name, {f"{arm} ({label}, seed {seed})": [(s["step"], v) for s in steps
                                                        if (v := _figure(s, name)) is not None]
                      for (arm, label, seed), steps in runs.items()}) for name in CURVES]
    return draw([(name, lines) for name, lines in panels if any(lines.values())], out,
                marked=frozenset({"val_success"}))
