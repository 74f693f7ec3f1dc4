"""The paper's runs as checked-in configs (configs/paper/): each parses into the study's own configs,
plans as `colbench experiment backend --config FILE --dry-run` prints it, and says where it departs
from the official run; the files' keys are the dataclasses' fields, so a misspelt one is refused."""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from conftest import command_line
from colbench.experiment_config import ExperimentConfig
from colbench.recipe import BY_DESIGN

PAPER = Path(__file__).resolve().parent.parent / "configs" / "paper"
CONFIGS = sorted(PAPER.glob("*.yaml"))
# What each experiment trains, as its plan's "policies" stage names it, and whether it fits a critic.
EXPECTED = {
    "backend-sweet": ("SWEET-RL", True), "backend-rft": ("rejection fine-tuning", False),
    "backend-mtdpo": ("multi-turn DPO", False), "backend-best-of-n": ("none", True),
    "frontend-sweet": ("SWEET-RL", True), "frontend-rft": ("rejection fine-tuning", False),
    "frontend-mtdpo": ("multi-turn DPO", False),
}
SIMULATOR = "the human simulator is endpoint:http://127.0.0.1:8001/v1#meta-llama/Llama-3.1-70B-Instruct"


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a dry run must write nothing, here included
    return command_line(None, capsys, monkeypatch)


def dry_run(cli, path: Path, *flags: str):
    return cli("experiment", "backend", "--config", str(path), "--dry-run", *flags)


def test_there_is_a_config_per_experiment_of_the_paper():
    assert {path.stem for path in CONFIGS} == set(EXPECTED)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_every_key_is_a_field_and_no_key_restates_its_default(path):
    """The file's keys are ExperimentConfig's fields (critic:, policy: the trainers'), and each sets a
    value the field does not have already: a default stated twice would drift from its declaration."""
    document = yaml.safe_load(path.read_text())
    study = ExperimentConfig()
    for section, config in (("critic", study.critic), ("policy", study.policy)):
        for key, value in document.pop(section, {}).items():
            assert key in {f.name for f in fields(type(config))}, f"{path.name}: {section}.{key}"
            assert getattr(config, key) != value, f"{path.name}: {section}.{key} restates its default"
    for key, value in document.items():
        assert key in {f.name for f in fields(ExperimentConfig)}, f"{path.name}: {key}"
        assert getattr(study, key) != value, f"{path.name}: {key} restates its default"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_each_config_plans_its_stages_from_the_settings_in_the_file(path, cli, tmp_path):
    code, out, err = dry_run(cli, path, "--json")
    trains, fits_a_critic = EXPECTED[path.stem]
    frontend = path.stem.startswith("frontend")
    assert code == (1 if frontend else 0)
    if frontend:  # planned, and said plainly that it cannot run
        out = json.loads(out)  # the plan came before the refusal
        assert err.startswith("error: --tasks frontend cannot run: the study runs backend task sets only")
    assert list(tmp_path.iterdir()) == []  # no folder, no store
    stages = {stage["key"]: stage for stage in out["stages"]}
    assert list(stages) == ["rollouts", "critics", "policies", "evaluation"]
    family = "frontend" if frontend else "backend"
    assert stages["rollouts"]["title"].startswith(
        f"zero-shot rollouts: meta-llama/Llama-3.1-8B-Instruct on {family}:train")
    assert stages["policies"]["title"] == f"policies: {trains}"
    test_tasks = 500 if frontend else 1000
    assert stages["evaluation"]["title"] == f"evaluation: every policy on up to {test_tasks} tasks of test"
    # The file's settings reach the trainers the study would build (not the CPU-sized defaults).
    if fits_a_critic:
        critic = stages["critics"]["details"][0]
        assert "full fine-tune, lr 2e-07" in critic and "batch 1 x 8 accumulated, at most 8192 tokens" in critic
        assert f"{8 if frontend else 4} epoch(s)" in critic and "normalised per trajectory" in critic
    else:
        assert stages["critics"]["title"] == "critics: none (no arm needs one)"
    if trains != "none":
        policy = stages["policies"]["details"][0]
        assert "full fine-tune, lr 2e-07" in policy and "at most 16384 tokens" in policy
    config = out["config"]
    assert config["model"] == "meta-llama/Llama-3.1-8B-Instruct" and config["engine"] == "vllm"


def test_a_backend_config_departs_only_where_colbench_does_by_design(cli):
    """The paper's SWEET-RL file is the official run: its deviations are the simulator's address (not
    a model name the recipe can check) and the four by design, nothing else."""
    code, out, _ = dry_run(cli, PAPER / "backend-sweet.yaml", "--json")
    assert code == 0 and out["deviations"] == [SIMULATOR + " (paper: Llama-3.1-70B-Instruct)", *BY_DESIGN]


def test_the_printed_dry_run_lists_the_stages_and_the_deviations(cli):
    code, out, _ = dry_run(cli, PAPER / "backend-best-of-n.yaml")
    assert code == 0
    text = " ".join(out.split())  # as read, whatever the terminal's width wrapped
    stages, deviations = text.split("deviations from the official run's recipe:")
    assert "1/4 zero-shot rollouts: meta-llama/Llama-3.1-8B-Instruct on backend:train tasks 1-5000, k=3" in stages
    assert "2/4 critics: Bradley-Terry on pairs of the zero-shot train trajectories" in stages
    assert "3/4 policies: none" in stages and "among 32 samples" in stages
    assert "4/4 evaluation: every policy on up to 1000 tasks of test" in stages
    assert deviations.startswith(f" - {SIMULATOR} (paper: Llama-3.1-70B-Instruct)")
    # best-of-N trains no policy: the policy trainer's CPU-sized defaults are no departure of this run
    assert "polic" not in deviations and "LoRA" not in deviations


def test_flags_on_the_command_line_win_and_their_departure_is_printed(cli):
    code, out, _ = dry_run(cli, PAPER / "backend-sweet.yaml", "--policy-candidates", "8", "--train-tasks", "100",
                           "--critic-max-len", "4096")
    assert code == 0
    out = " ".join(out.split())
    assert "on backend:train tasks 1-100, k=3" in out  # the flag, over the file's 5000
    assert "8 candidates per turn" in out and "at most 4096 tokens" in out
    assert "- 8 SWEET candidates per turn (paper: 16)" in out
    assert "- the critic reads at most 4096 tokens (official: 8192)" in out


def test_a_frontend_config_is_refused_without_dry_run_before_anything_is_made(cli, tmp_path):
    code, _, err = cli("experiment", "backend", "--config", str(PAPER / "frontend-sweet.yaml"))
    assert code == 1 and err.count("\n") == 1 and "docs/scale.md" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, unknown", [
    ("arms: [sweet]\ncandidates: 8\n", "candidates"),  # a policy setting at the top level
    ("critic:\n  epoch: 4\n", "critic.epoch"),  # misspelt
    ("critc:\n  epochs: 4\n", "critc"),  # a misspelt section is not skipped as some other layer's
    ("policy:\n  family: frontend\n", "policy.family"),  # the study sets it itself
])
def test_an_unknown_key_is_one_line_naming_the_file_and_the_key(cli, tmp_path, text, unknown):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, out, err = dry_run(cli, path)
    assert code != 0 and out == ""
    assert err == f"error: --config {path}: unknown setting {unknown} (see --help for the flags)\n"


def test_a_bad_value_is_refused_by_the_same_check_as_its_flag(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("arms: [sweet, dpo]\npolicy:\n  candidates: 16\n")
    code, _, err = dry_run(cli, path)
    assert code != 0 and err.count("\n") == 1 and "arms must be one of" in err and "'dpo'" in err
    path.write_text("critic:\n  max_len: 8\n")
    code, _, err = dry_run(cli, path)
    assert code != 0 and err == "error: max_len must be at least 16; got 8\n"

