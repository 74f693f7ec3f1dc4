"""Rich renderers of trajectory lists (`colbench ls`)."""
from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from colbench.cli.views.cells import STATUS_STYLE, reward_text
from colbench.runs import labelled


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else ""


def trajectory_summary(trajectory, task, agent_turns: int) -> dict[str, Any]:
    return {
        "id": trajectory.id,
        "task_id": task.id,
        "family": task.family,
        "split": task.split,
        "run": f"rollout:{trajectory.rollout_id}" if trajectory.rollout_id else None,
        "policy": trajectory.policy,
        "simulator": trajectory.simulator,
        "setting": trajectory.setting,
        "sample_index": trajectory.sample_index,
        "seed": trajectory.seed,
        "status": trajectory.status,
        "agent_turns": agent_turns,
        "reward": trajectory.reward,
        "success": trajectory.success,
        "failure": trajectory.failure,
        "finished_at": trajectory.finished_at,
    }


def trajectories_table(rows) -> Table:
    table = Table(title=f"trajectories ({len(rows)})", title_justify="left")
    for name in (
        "id", "task", "run", "policy [setting]", "simulator", "#", "status", "turns", "reward", "success", "finished"
    ):
        table.add_column(name, justify="right" if name in ("id", "task", "#", "turns", "reward") else "left")
    for trajectory, task, agent_turns in rows:
        status = Text(trajectory.status, style=STATUS_STYLE.get(trajectory.status, ""))
        success = "" if trajectory.success is None else ("✓" if trajectory.success else "✗")
        table.add_row(
            str(trajectory.id),
            f"{task.id} {task.family[0]}/{task.split}",
            f"rollout:{trajectory.rollout_id}" if trajectory.rollout_id else "",
            Text(labelled(trajectory.policy, trajectory.setting)),
            Text(trajectory.simulator),
            str(trajectory.sample_index),
            status,
            str(agent_turns),
            reward_text(trajectory.reward),
            success,
            _when(trajectory.finished_at),
        )
    return table
