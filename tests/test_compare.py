"""`colbench compare`: the paired test, the bootstrap interval and the run-to-run noise, checked
against brute force and simulation, and end to end on scripted agents' rollouts."""
from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from colbench.compare import Side, compare, sign_flip_p_value
from conftest import command_line

LITE = ["--tasks", "backend-lite:test", "--limit", "30", "-k", "3", "--sandbox", "bwrap"]


def test_the_exact_sign_flip_test_is_the_share_of_flips_at_least_as_extreme():
    diff = np.array([0.5, 1.0, -0.25, 0.0, 0.75])
    brute = np.mean(
        [abs((np.array(s) * diff).mean()) >= abs(diff.mean()) - 1e-12 for s in product((1, -1), repeat=diff.size)]
    )
    assert sign_flip_p_value(diff, np.random.default_rng(0)) == (pytest.approx(brute), True)
    assert sign_flip_p_value(np.ones(6), np.random.default_rng(0))[0] == pytest.approx(2 / 64)  # all up, or all down
    many, exact = sign_flip_p_value(np.ones(40), np.random.default_rng(0))
    assert not exact and 0 < many < 1e-3  # the random test counts the observed flip: never exactly 0


def test_run_to_run_noise_matches_the_spread_of_repeated_runs():
    """Two runs of the same policies on fixed tasks differ by sampling alone; the noise estimated from
    one pair of runs' repeated samples must match the spread seen over many such pairs."""
    rng = np.random.default_rng(1)
    chance = rng.uniform(0.1, 0.9, size=50)  # each task's true success rate
    samples = 4

    def run() -> Side:
        return Side("x", "backend:test",
                    {t: [(float(hit), float(hit)) for hit in rng.random(samples) < p] for t, p in enumerate(chance)})

    outcomes = [compare(run(), run(), "success") for _ in range(400)]
    observed_sd = np.std([c.difference.mean for c in outcomes])
    estimated_sd = np.mean([c.noise_sd for c in outcomes])
    assert estimated_sd == pytest.approx(observed_sd, rel=0.12)
    assert np.mean([c.exceeds_noise for c in outcomes]) < 0.1  # ~5% false alarms at 1.96 sd
    assert np.mean([c.p_value < 0.05 for c in outcomes]) < 0.1


def test_compare_tells_a_real_difference_from_noise(sqlite_url, capsys, monkeypatch):
    run = command_line(sqlite_url, capsys, monkeypatch)

    def colbench(*args):
        code, out, err = run(*args)
        assert code == 0, err
        return out

    colbench("rollout", "--engine", "scripted:mixed@0.5", *LITE, "--name", "mixed")
    colbench("rollout", "--engine", "scripted:mixed@0.5", *LITE, "--seed", "7")
    colbench("rollout", "--engine", "scripted:expert", *LITE, "--name", "expert")

    real = colbench("compare", "mixed", "expert", "--json")
    assert real["n_tasks"] == 30 and real["mean_b"] == 1.0 and real["difference"]["low"] > 0.3
    assert real["p_value"] < 1e-3 and real["exceeds_noise"] is True and real["lost"] == [] and len(real["gained"]) > 0
    noise = colbench("compare", "mixed", "scripted:mixed@0.5", "--tasks", "backend-lite:test", "--setting", "seed=7",
                     "--json")
    assert noise["b"] == "scripted:mixed@0.5 [seed=7]" and noise["mean_a"] != noise["mean_b"]  # other samples...
    assert noise["exceeds_noise"] is False and noise["p_value"] > 0.05  # ...of the same policy: within the noise
    assert noise["difference"]["low"] < 0 < noise["difference"]["high"]
    swapped = colbench("compare", "expert", "mixed", "--json")
    assert (
        swapped["difference"]["mean"] == pytest.approx(-real["difference"]["mean"])
        and swapped["lost"] == real["gained"]
    )

    partial = colbench("compare", "mixed", "expert", "--metric", "reward", "--json")  # the share of tests passed
    assert partial["metric"] == "reward" and partial["mean_b"] == 1.0 and real["mean_a"] < partial["mean_a"] < 1.0

    text = colbench("compare", "mixed", "expert")
    assert "B − A" in text and "exceeds it" in text and "rollout:3 (expert)" in text
    code, _, err = run("compare", "mixed", "nosuch-policy", "--tasks", "backend-lite:test")
    assert code == 1 and "nosuch-policy has no graded trajectories" in err
    code, _, err = run(
        "compare", "scripted:expert", "scripted:mixed@0.5", "--tasks", "backend-lite:test", "--setting", "max=9"
    )
    assert code == 1 and "scripted:expert [max=9] has no graded trajectories" in err and "under --setting ''" in err
    assert "--setting 'seed=7'" not in err  # that setting is mixed's, not expert's

    # The study's column: each arm against the zero-shot policy on the same tasks, each side under its
    # own setting (an arm can be the zero-shot policy under another setting, as best-of-N is).
    from colbench.eval import evaluate
    from colbench.experiment import Arm, BackendExperiment
    from colbench.experiment_config import ExperimentConfig
    from colbench.store.db import Database

    db = Database(sqlite_url)

    def arm(key: str, policy: str, setting: str = "") -> Arm:
        [found] = evaluate(db, "backend", "lite-test", policies=[policy], setting=setting, record=False)
        return Arm(key, model=policy, results={"lite-test": found})

    arms = [arm("zero-shot", "scripted:mixed@0.5"), arm("sweet", "scripted:expert"),
            arm("best-of-n", "scripted:mixed@0.5", "seed=7")]
    BackendExperiment(db, ExperimentConfig(tasks="backend-lite", evaluate_on="test")).compare_with_zero_shot(arms)
    assert arms[0].versus_zero_shot == {}
    better, same = arms[1].versus_zero_shot["lite-test"], arms[2].versus_zero_shot["lite-test"]
    assert (
        better["difference"] == real["difference"]
        and better["p_value"] == real["p_value"]
        and better["gained"] == real["gained"]
    )
    assert same["difference"] == noise["difference"] and same["b"] == "scripted:mixed@0.5 [seed=7]"
    assert "lite-novel" not in arms[1].versus_zero_shot  # no zero-shot results there: nothing to pair with
