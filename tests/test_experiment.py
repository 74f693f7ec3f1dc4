"""`colbench experiment backend` on the tiny model: every stage runs, lands in the store,
the table shows every arm, a rerun redoes nothing, and a study whose rollouts hold no
success reports the untrainable arms instead of failing."""
from __future__ import annotations

import json

import pytest
from sqlmodel import func, select

from colbench.official import import_trajectories
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Checkpoint, Task, TrainingRun, Trajectory
from conftest import command_line, write_jsonl
from officialdata import backend_task, trajectory

TINY_STUDY = [
    "--train-tasks", "1", "-k", "1", "--test-tasks", "2", "--max-new-tokens", "4", "--batch-size", "4",
    "--critic-epochs", "1", "--policy-candidates", "2", "--policy-fraction", "0.5", "--critic-lr", "1e-3",
    "--policy-lr", "1e-3",
    "--critic-lora-rank", "4", "--policy-lora-rank", "4", "--critic-max-len", "160", "--policy-max-len", "160",
    "--sandbox", "bwrap", "--device", "cpu",
]


@pytest.fixture
def cli(capsys, monkeypatch):
    return command_line(None, capsys, monkeypatch)


def counts(db):
    with db.read() as session:
        return (
            session.exec(select(func.count()).select_from(TrainingRun)).one(),
            session.exec(select(func.count()).select_from(Checkpoint)).one(),
            session.exec(select(func.count()).select_from(Trajectory)).one(),
        )


def test_the_whole_study_runs_reports_every_arm_and_a_rerun_redoes_nothing(tiny_model_dir, tmp_path, cli):
    folder = tmp_path / "study"
    folder.mkdir()
    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    # Offline data beside the zero-shot rollouts (a random tiny model never succeeds):
    # per task a correct trajectory, a partial one and a failure, so every trainer has data.
    records = [
        t
        for i in range(2)
        for t in (
            trajectory(backend_task(i), 2, 1.0),
            trajectory(backend_task(i), 1, 0.3),
            trajectory(backend_task(i), 3, 0.0)
        )
    ]
    import_trajectories(db, write_jsonl(tmp_path / "offline.jsonl", records))

    code, result, err = cli(
        "experiment", "backend", "--model", str(tiny_model_dir), "--dir", str(folder), "--json", "--no-on-policy",
        "--label", "final", *TINY_STUDY
    )
    assert code == 0, err
    arms = {a["arm"]: a for a in result["arms"]}
    # The study's files hold every evaluated trajectory, and their report gives the experiment's own figures.
    from colbench.study import report

    recorded = {a["arm"]: a for a in report(folder)["arms"]}
    assert sorted(recorded) == sorted(arms) and all(
        a["label"] == "final" and a["split"] == "test" and a["n"] == 2 for a in recorded.values()
    )
    for key, arm in arms.items():
        assert recorded[key]["success"]["mean"] == arm["tests"]["test"]["success"]["mean"]
        assert recorded[key]["tests_passed"]["mean"] == pytest.approx(arm["tests"]["test"]["reward"]["mean"])
        if key != "zero-shot":
            assert recorded[key]["versus_zero_shot"]["difference"] == arm["vs_zero_shot"]["test"]["difference"]
    assert list(arms) == ["zero-shot", "rft", "mtdpo", "sweet", "sweet-no-c"]
    for key in ("rft", "mtdpo", "sweet", "sweet-no-c"):
        assert arms[key]["model"].startswith("ckpt:"), arms[key]["training"]
    # every arm was rolled out on the two test tasks and evaluated under its own name
    zero_shot = arms["zero-shot"]["training"]["base"]
    assert zero_shot == f"hf:{tiny_model_dir}"
    assert all(
        a["tests"]["test"]["n_tasks"] == 2
        and a["tests"]["test"]["policy"] == (a["model"] if a["arm"] != "zero-shot" else zero_shot)
        for a in arms.values()
    )
    assert result["critics"]["with c"]["checkpoint"] != result["critics"]["without c"]["checkpoint"]

    with db.read() as session:
        runs = {r.id: r for r in session.exec(select(TrainingRun)).all()}
        train_policies = set(session.exec(select(Trajectory.policy).join(Task).where(Task.split == "train")).all())
    by_critic = {r.config.get("critic_checkpoint_id") for r in runs.values() if r.kind == "policy:sweet"}
    critic_ids = {int(result["critics"][name]["checkpoint"].removeprefix("ckpt:")) for name in ("with c", "without c")}
    assert by_critic == critic_ids  # each SWEET policy was ranked by its own critic
    assert {r.config["training_info"] for r in runs.values() if r.kind == "critic"} == {True, False}
    rft = next(r for r in runs.values() if r.kind == "policy:rft")
    assert "candidates" not in rft.config and "rft_threshold" in rft.config  # a run records only its own settings
    assert zero_shot in train_policies  # the zero-shot rollouts on train are in the store
    assert all(r.status == "done" for r in runs.values())

    table = (folder / "results.md").read_text()
    for title in (
        "zero-shot", "rejection fine-tuning", "multi-turn DPO", "SWEET-RL", "SWEET-RL, critic without training info"
    ):
        assert f"| {title} |" in table
    assert json.loads((folder / "results.json").read_text())["arms"] == result["arms"]
    deviations = table.split("**Deviations from the official run's recipe**")[1]
    for line in (
        "the critic reads at most 160 tokens (official: 8192)",
        "the policy trains on at most 160 tokens (official: 16384)", "2 SWEET candidates per turn (paper: 16)",
        "4 tokens per agent turn (paper: 1024)", "LoRA critic"
    ):
        assert line in deviations

    before = counts(db)
    # As an older colbench recorded them: settings added since (at their defaults) are missing from the runs' configs.
    newer = {"seed", "turns", "pass_rows"}
    with db.write() as session:
        for run in session.exec(select(TrainingRun)):
            assert "seed" in run.config and ("turns" in run.config) == (run.kind == "policy:sweet")
            run.config = {k: v for k, v in run.config.items() if k not in newer}
            session.add(run)
    code, out, err = cli(
        "experiment", "backend", "--model", str(tiny_model_dir), "--dir", str(folder), "--no-on-policy", *TINY_STUDY,
        "--label", "renamed", "--record-arm", "rft=rft-2", "--record-arm", "zero-shot="
    )
    assert code == 0, err
    assert counts(db) == before  # nothing retrained, nothing rolled out again
    # The rerun recorded its arms under the names asked for (and no zero-shot rows), each row with its trainer's seed.
    renamed = [r for r in study_rows(folder) if r["label"] == "renamed"]
    assert {r["arm"] for r in renamed} == {"rft-2", "mtdpo", "sweet", "sweet-no-c"}
    assert {r["seed"] for r in renamed} == {0} and len(renamed) == 4 * 2
    assert "SWEET-RL" in out and "held-out pair accuracy" in out
    assert "deviations from the official run's recipe:" in out and "LoRA policies (official: full fine-tune)" in out
    # A SWEET-only setting changes: only the SWEET policies are trained again (and rolled out).
    code, out, err = cli(
        "experiment", "backend", "--model", str(tiny_model_dir), "--dir", str(folder), "--json", "--no-on-policy",
        *TINY_STUDY, "--policy-candidates", "3"
    )
    assert code == 0, err
    with db.read() as session:
        new_runs = session.exec(select(TrainingRun).where(TrainingRun.id > max(runs))).all()
    assert sorted(r.kind for r in new_runs) == ["policy:sweet", "policy:sweet"]


def test_a_study_from_a_named_checkpoint_finds_its_trained_stages_again(tiny_model_dir, tmp_path, cli):
    """`--model ckpt:<run name>` (study 3 starts from ckpt:warm): the runs record the checkpoint by id, and a rerun
    of the same command must still find them, not train again."""
    folder = tmp_path / "study"
    folder.mkdir()
    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    records = [t for i in range(2) for t in (trajectory(backend_task(i), 2, 1.0), trajectory(backend_task(i), 3, 0.0))]
    import_trajectories(db, write_jsonl(tmp_path / "offline.jsonl", records))
    code, _, err = cli("--db", f"sqlite:///{folder / 'colbench.db'}", "grade", "--sandbox", "bwrap")
    assert code == 0, err
    code, _, err = cli("--db", f"sqlite:///{folder / 'colbench.db'}", "policy", "fit", "--algo", "sft", "--model",
                       str(tiny_model_dir), "--name", "warm", "--epochs", "1", "--lora-rank", "4", "--max-len", "160",
                       "--device", "cpu", "--policies", "*")  # the imported dialogues, not scripted ones
    assert code == 0, err
    study = ["experiment", "backend", "--model", "ckpt:warm", "--dir", str(folder), "--no-on-policy", "--arm", "rft",
             *TINY_STUDY]
    code, _, err = cli(*study)
    assert code == 0, err
    with db.read() as session:
        warm = session.exec(select(TrainingRun).where(TrainingRun.name == "warm")).one()
        rft = session.exec(select(TrainingRun).where(TrainingRun.kind == "policy:rft")).one()
        [warm_checkpoint] = queries.run_checkpoints(session, warm.id)
    assert rft.parent_checkpoint_id == warm_checkpoint.id  # it continued ckpt:warm, which it records by id
    before = counts(db)
    code, _, err = cli(*study)
    assert code == 0, err
    assert counts(db) == before  # nothing trained or rolled out again


def test_a_study_without_any_success_reports_what_could_not_be_trained(tiny_model_dir, tmp_path, cli):
    folder = tmp_path / "study"
    code, result, err = cli(
        "experiment", "backend", "--model", str(tiny_model_dir), "--dir", str(folder), "--json", "--arm", "rft",
        "--arm", "mtdpo", "--arm", "sweet", "--critic-ensemble", "2", *TINY_STUDY
    )
    assert code == 0, err
    arms = {a["arm"]: a for a in result["arms"]}
    assert list(arms) == ["zero-shot", "rft", "mtdpo", "sweet"]
    assert (
        "fully correct" in result["critics"]["with c"]["skipped"]
        and "fully correct" in result["critics"]["with c #2"]["skipped"]
    )
    assert "no successful trajectory" in arms["rft"]["training"]["skipped"]
    assert "critic could not be trained" in arms["sweet"]["training"]["skipped"]
    assert arms["rft"]["tests"]["test"] is None and arms["zero-shot"]["tests"]["test"]["success"]["mean"] == 0.0
    assert "not trained" in (folder / "results.md").read_text()


def test_experiment_flags_are_checked(cli, tmp_path):
    code, out, err = cli("experiment", "backend", "--dir", str(tmp_path), "--policy-candidates", "1")
    assert code != 0 and "candidates" in err


def test_the_deviations_list_every_setting_that_leaves_the_official_run():
    """The defaults differ from the official run in their context caps, LoRA and learning rates;
    a study set to the official run's values lists only what this toolkit does differently by
    design (and the simulator, which a CPU cannot replace with a 70B model)."""
    from dataclasses import asdict, replace

    from colbench.experiment_config import ExperimentConfig, study_critic, study_policy
    from colbench.recipe import BY_DESIGN, deviations

    default = deviations(asdict(ExperimentConfig()))
    for expected in (
        "the critic reads at most 2048 tokens (official: 8192)",
        "the policy trains on at most 2048 tokens (official: 16384)", "LoRA critic (official: full fine-tune)",
        "critic learning rate 2e-05 (official: 2e-07 for 8B)", "the critic's advantage is normalised per turn"
    ):
        assert any(line.startswith(expected) for line in default), (expected, default)
    official = ExperimentConfig(
        max_new_tokens=1024, simulator="endpoint:http://127.0.0.1:8000/v1#llama-70b",
        critic=replace(study_critic(), full=True, max_len=8192, normalize="trajectory"),
        policy=replace(study_policy(), full=True, max_len=16384),
    )
    assert deviations(asdict(official)) == [
        "the human simulator is endpoint:http://127.0.0.1:8000/v1#llama-70b (paper: Llama-3.1-70B-Instruct)",
        *BY_DESIGN
    ]
    remedied = asdict(replace(official, policy=replace(official.policy, nll_weight=0.2, score="critic", candidates=8)))
    assert set(deviations(remedied)) - set(deviations(asdict(official))) == {
        "NLL weight 0.2 on the chosen side (official: 0.01)",
        "8 SWEET candidates per turn (paper: 16)",
        (
            "SWEET ranks candidates by the critic's own advantage (official: the critic's mean log-prob minus the"
            " sampler's)"
        )
    }


def test_a_lite_study_evaluates_on_validation_unless_told_to_read_the_test_sets(cli, tmp_path):
    from colbench.experiment_config import ExperimentConfig

    assert ExperimentConfig(tasks="backend-lite").test_splits == ("lite-val",)
    assert ExperimentConfig(tasks="backend-lite", evaluate_on="test").test_splits == ("lite-test", "lite-novel")
    assert ExperimentConfig(tasks="backend").test_splits == ("test",)
    # One test set alone, so that a study short of time reads lite-test before lite-novel.
    assert ExperimentConfig(tasks="backend-lite", evaluate_on="lite-test").test_splits == ("lite-test",)
    # The fresh split (study 3's test set) only when named: `test` never reads it.
    assert ExperimentConfig(tasks="backend-lite", evaluate_on="fresh").test_splits == ("lite-fresh",)
    assert ExperimentConfig(tasks="backend-lite", evaluate_on="fresh2").test_splits == ("lite-fresh2",)
    with pytest.raises(ValueError, match="cannot be evaluated on fresh"):
        ExperimentConfig(tasks="backend", evaluate_on="fresh")
    with pytest.raises(ValueError, match="cannot be evaluated on lite-test: choose test"):
        ExperimentConfig(tasks="backend", evaluate_on="lite-test")
    with pytest.raises(ValueError, match="cannot be evaluated on val"):
        ExperimentConfig(tasks="backend", evaluate_on="val")
    code, out, err = cli("experiment", "backend", "--dir", str(tmp_path), "--evaluate-on", "val")
    assert code != 0 and "cannot be evaluated on val: choose test" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("experiment", "backend", "--dir", str(tmp_path), "--arm", "rft", "--arm", "sweet-magic")
    assert code != 0 and "'sweet-magic'" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("experiment", "backend", "--dir", str(tmp_path), "--arm", "sweet-oracle")
    assert code != 0 and "needs --tasks backend-lite" in err


def study_rows(folder):
    from colbench.study import TRAJECTORIES, read_jsonl

    return read_jsonl(folder / TRAJECTORIES)


def test_a_second_round_study_reads_later_train_tasks_both_rounds_for_its_critic_and_its_own_trainer_seed():
    """What a study from round 1's policy needs (studies/backend-lite-3): its zero-shot rollouts on the train tasks
    after --train-offset (test reads start at the first task), critics on --critic-policy's dialogues too, and a
    trainer seed apart from the rollouts' seed."""
    from colbench.experiment_config import ExperimentConfig

    config = ExperimentConfig(tasks="backend-lite", train_tasks=100, train_offset=100, test_tasks=120,
                              critic_policies=["ckpt:1"], seed=0, trainer_seed=1)
    train, val = config.rollout("ckpt:2", "lite-train"), config.rollout("ckpt:2", "lite-val")
    assert (train.offset, train.limit, train.seed) == (100, 100, 0) and (val.offset, val.limit, val.seed) == (0, 120, 1)
    assert config.critic_data("ckpt:2") == "ckpt:2,ckpt:1"
    assert config.critic_settings(True, "ckpt:2,ckpt:1").policies == "ckpt:2,ckpt:1"
    assert config.critic_settings(True, None).seed == config.policy_settings(None).seed == 1
    assert ExperimentConfig(tasks="backend-lite").policy_settings(None).seed == 0  # --seed, when unset
    assert ExperimentConfig(tasks="backend-lite", on_policy=False, critic_policies=["x"]).critic_data("z") is None
    named = ExperimentConfig(tasks="backend-lite", record_arms=["sweet=rft+sweet", "zero-shot="])
    assert [named.recorded_name(k) for k in ("sweet", "zero-shot", "rft")] == ["rft+sweet", "", "rft"]
    with pytest.raises(ValueError, match="--record-arm takes KEY=NAME"):
        ExperimentConfig(tasks="backend-lite", record_arms=["sweeter=x"])


def test_on_policy_rounds_roll_out_the_last_policy_on_fresh_tasks_and_continue_it(tiny_model_dir, tmp_path, cli):
    """--rounds 2: round 2 rolls the SWEET-RL policy out on the next train task, refits the critic
    on every trajectory so far, and continues the SWEET-RL policy on the new rollouts alone."""
    from colbench.store.models import Lineage, RolloutRun

    folder = tmp_path / "study"
    folder.mkdir()
    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    records = [t for i in range(2) for t in (trajectory(backend_task(i), 2, 1.0), trajectory(backend_task(i), 3, 0.0))]
    import_trajectories(db, write_jsonl(tmp_path / "offline.jsonl", records))
    code, out, err = cli(
        "experiment", "backend", "--model", str(tiny_model_dir), "--dir", str(folder), "--json", "--no-on-policy",
        "--arm", "sweet", "--rounds", "2", *TINY_STUDY
    )
    assert code == 0, err
    arms = {a["arm"]: a for a in out["arms"]}
    assert (
        list(arms) == ["zero-shot", "sweet", "sweet-round-2"]
        and arms["sweet-round-2"]["title"] == "SWEET-RL, on-policy round 2"
    )
    round2 = arms["sweet-round-2"]["training"]
    assert round2["round"]["from"] == arms["sweet"]["model"] and round2["round"]["data"] == arms["sweet"]["model"]
    with db.read() as session:
        runs = {r.id: r for r in session.exec(select(TrainingRun))}
        policy = runs[round2["run_id"]]
        fresh = session.exec(select(RolloutRun).where(RolloutRun.policy == arms["sweet"]["model"],
                                                      RolloutRun.tasks == "backend:train")).one()
        trained_on = {row.trajectory_id for row in session.exec(select(Lineage).where(Lineage.run_id == policy.id))}
        fresh_ids = {t.id for t in session.exec(select(Trajectory).where(Trajectory.rollout_id == fresh.id))}
    assert policy.parent_checkpoint_id == int(arms["sweet"]["model"].removeprefix("ckpt:"))  # continued, not restarted
    assert trained_on and trained_on <= fresh_ids  # the new rollouts alone
    assert fresh.config["offset"] == 1 and fresh.config["limit"] == 1  # the next train task
    assert sorted(r.kind for r in runs.values()) == [
        "critic", "critic", "policy:sweet", "policy:sweet"
    ]  # the critic refitted
    code, out, err = cli("experiment", "backend", "--dir", str(tmp_path / "x"), "--rounds", "2", "--arm", "rft")
    assert code != 0 and "--rounds needs" in err


# Two online steps of one task x 2 dialogues, validated inside the run at the second on one task.
ONLINE = ("--policy-steps", "2", "--policy-tasks-per-step", "1", "--policy-group", "2", "--policy-eval-every", "2",
          "--policy-eval-limit", "1")


def test_online_arms_train_with_their_own_credit_and_keep_their_steps_in_the_study(tiny_model_dir, tmp_path, cli):
    """Study 4's online arms (studies/backend-lite-4): plain GRPO and GRPO with the turn credit --turn-credit
    names, each recorded under its study name with every stored step of its run, and read back by the report."""
    from colbench.study import report
    from colbench.study_online import STEPS, run_steps
    from colbench.study import read_jsonl

    folder = tmp_path / "study"
    folder.mkdir()
    db = Database(f"sqlite:///{folder / 'colbench.db'}")
    code, result, err = cli(
        "experiment", "backend", "--tasks", "backend-lite", "--model", str(tiny_model_dir), "--dir", str(folder),
        "--json", "--label", "online", "--arm", "grpo", "--arm", "grpo-credit", "--turn-credit", "random",
        "--record-arm", "grpo-credit=grpo+random", "--record-arm", "zero-shot=", *ONLINE, *TINY_STUDY
    )
    assert code == 0, err
    arms = {a["arm"]: a for a in result["arms"]}
    # zero-shot= in a labelled run: the study keeps no read of it, so none is made (only the arms' own reads).
    with db.read() as session:
        read = set(session.exec(select(Trajectory.policy).join(Task).where(Task.split == "lite-val")))
    # the arms' final weights, and each run's in-run validation checkpoints; never the starting model
    assert {arms["grpo"]["model"], arms["grpo-credit"]["model"]} < read
    assert all(policy.startswith("ckpt:") for policy in read), read
    with db.read() as session:
        runs = {run.id: run for run in session.exec(select(TrainingRun))}
    credit = {runs[arms[key]["training"]["run_id"]].config["turn_credit"] for key in ("grpo", "grpo-credit")}
    assert runs[arms["grpo"]["training"]["run_id"]].config["turn_credit"] == "none"
    assert credit == {"none", "random"}
    steps = read_jsonl(folder / STEPS)
    for key, name in (("grpo", "grpo"), ("grpo-credit", "grpo+random")):
        mine = [s for s in steps if s["arm"] == name]
        run_id = arms[key]["training"]["run_id"]
        assert [s["step"] for s in mine] == [1, 2] and {s["run_id"] for s in mine} == {run_id}
        assert [s["reward"] for s in mine] == [s["reward"] for s in run_steps(db, run_id)]
        # validated inside the run on the study's validation split (backend-lite's lite-val), its first task
        assert [s.get("val_success") is not None for s in mine] == [False, True]
        assert runs[run_id].config["eval_tasks"] == "backend:lite-val"
    online = {row["arm"]: row for row in report(folder)["online"]}
    assert set(online) == {"grpo", "grpo+random"} and online["grpo"]["dialogues"] == 4
    # A rerun trains nothing again and leaves the steps as they were.
    before, written = counts(db), (folder / STEPS).read_text()
    code, _, err = cli(
        "experiment", "backend", "--tasks", "backend-lite", "--model", str(tiny_model_dir), "--dir", str(folder),
        "--label", "online", "--arm", "grpo", "--arm", "grpo-credit", "--turn-credit", "random",
        "--record-arm", "grpo-credit=grpo+random", "--record-arm", "zero-shot=", *ONLINE, *TINY_STUDY
    )
    assert code == 0, err
    assert counts(db) == before and (folder / STEPS).read_text() == written
    # An arm recorded as nothing under another label is found trained and not read: only the other arm's rows.
    code, again, err = cli(
        "experiment", "backend", "--tasks", "backend-lite", "--model", str(tiny_model_dir), "--dir", str(folder),
        "--json", "--label", "again", "--arm", "grpo", "--arm", "grpo-credit", "--turn-credit", "random",
        "--record-arm", "grpo-credit=grpo+random", "--record-arm", "zero-shot=", "--record-arm", "grpo=",
        *ONLINE, *TINY_STUDY
    )
    assert code == 0, err
    assert counts(db) == before
    assert {r["arm"] for r in read_jsonl(folder / "trajectories.jsonl") if r["label"] == "again"} == {"grpo+random"}
    tests = {a["arm"]: a["tests"] for a in again["arms"]}
    assert not tests["grpo"].get("lite-val") and not tests["zero-shot"].get("lite-val")
    assert tests["grpo-credit"]["lite-val"]["success"] is not None


def test_validation_inside_an_online_run_needs_a_validation_split(cli, tmp_path):
    """backend has no validation split: an online arm validating inside its run must be told where, before anything
    runs (a dry run says so); backend-lite's runs read lite-val."""
    plan = ("experiment", "backend", "--dir", str(tmp_path), "--arm", "grpo", "--policy-eval-every", "5", "--dry-run")
    code, out, err = cli(*plan)
    assert code != 0 and "--policy-eval-tasks" in err and "Traceback" not in err
    code, out, err = cli(*plan, "--policy-eval-tasks", "backend:test")
    assert code == 0, err
    code, out, err = cli(*plan, "--tasks", "backend-lite")
    assert code == 0, err


def test_the_credit_arm_needs_a_credit_of_its_own(cli, tmp_path):
    code, out, err = cli("experiment", "backend", "--tasks", "backend-lite", "--dir", str(tmp_path), "--arm",
                         "grpo-credit", "--dry-run")
    assert code != 0 and "--turn-credit" in err and "Traceback" not in err
    code, out, err = cli("experiment", "backend", "--tasks", "backend-lite", "--dir", str(tmp_path), "--arm",
                         "grpo-credit", "--turn-credit", "ref-infogain", "--dry-run")
    assert code == 0, err
    assert "online GRPO + a named turn credit: 25 online steps" in out and "+ ref-infogain's turn credit x1" in out
