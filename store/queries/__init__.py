"""Every read and write of the store: the only package that speaks SQL.

Recipes, the rollout and the commands reach the store through these functions, so
each query exists once and its indexes are chosen here. Each takes the session of a
``Database.read()`` or ``Database.write()`` block, so the caller decides what one
transaction holds.

One module per job (tasks, trajectories, claims, grades, runs, lineage, candidates,
evaluations); this package re-exports them all, so callers write ``queries.foo(...)``
without knowing which module holds ``foo``.
"""
from __future__ import annotations

from colbench.store.queries._shared import (
    insert_new,
    of_policies,
)
from colbench.store.queries.tasks import (
    existing_task_ids,
    add_tasks,
    move_tasks,
    tasks_by_id,
    tasks_in,
    task_references,
)
from colbench.store.queries.trajectories import (
    trajectories_of_turns,
    bulk_insert_trajectories,
    taken,
    TURN_IMPORT_COLUMNS,
    TURN_SAMPLER_COLUMNS,
    existing_trajectory_hashes,
    sample_counts,
    TrajectoryFilter,
    find_trajectories,
    compact_prompt,
    turns_of,
    test_results_of,
    add_screenshots,
    turns_for,
    leak_actions,
    trajectories_by_id,
    finished_trajectory_ids,
    add_rows,
    beat,
    finish,
    trajectory_with_task,
    screenshot_paths,
)
from colbench.store.queries.claims import (
    Slot,
    ensure_slots,
    slot_trajectories,
    claim,
    claimable,
    release,
)
from colbench.store.queries.grades import (
    next_graded_seq,
    graded_since,
    newest_graded_seq,
    trained_data,
    graded_rewards,
    answers_to_grade,
    save_grades,
)
from colbench.store.queries.runs import (
    newest_checkpoint_of,
    record_lineage,
    start_run,
    beat_run,
    fail_stale_runs,
    finish_run,
    add_run_metrics,
    run_metrics,
    fail_run,
    end_run,
    checkpoint_and_run,
    checkpoints_with_runs,
    same_run,
    open_rollout_run,
    name_holder,
    rollout_runs,
    rollout_run_names,
    training_runs,
    training_steps,
    add_training_steps,
    find_rollout_run,
    add_checkpoint,
    run_checkpoints,
    unfinished_run,
    extendable_runs,
    reopen_run,
)
from colbench.store.queries.lineage import (
    consumers_of_rollout,
    data_of_run,
    rollouts_of,
    users_of_checkpoints,
    reusers_of_candidates,
    delete_trajectories,
    rollout_trajectory_ids,
    delete_training_run,
)
from colbench.store.queries.candidates import (
    critic_scores_of,
    replace_critic_scores,
    credit_values,
    replace_credit_values,
    sweet_candidates,
    replace_sweet_candidates,
    add_sweet_pairs,
    sweet_pairs_of,
    candidates_of_run,
)
from colbench.store.queries.evaluations import (
    graded_outcomes,
    graded_trajectory_ids,
    graded_groups,
    add_evaluations,
    evaluations,
)
