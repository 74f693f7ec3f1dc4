"""The small-scale study end to end on the tiny model: scripted demonstrations on backend-lite,
a warm start by sft that learns to ask, the whole experiment on both lite test sets with
best-of-N, and the critic's evaluation against the turns' ground-truth labels."""
from __future__ import annotations

import pytest

from colbench.engines.hf import HFEngine
from colbench.store.db import Database
from colbench.official import spec_of
from colbench.tasks.lite import NOVEL_TEMPLATES, facts_of, template_of
from colbench.model_refs import checkpoint_lookup
from colbench.study import PAIRS, TRAJECTORIES, read_jsonl
from colbench.wiring import select_tasks
from conftest import command_line

STUDY = [
    "--tasks", "backend-lite", "--train-tasks", "3", "-k", "1", "--test-tasks", "1", "--max-new-tokens", "4",
    "--batch-size", "4",
    "--critic-epochs", "1", "--policy-candidates", "2", "--policy-fraction", "0.5", "--critic-lr", "1e-3",
    "--policy-lr", "1e-3",
    "--critic-lora-rank", "4", "--policy-lora-rank", "4", "--critic-max-len", "256", "--policy-max-len", "256",
    "--sandbox", "bwrap", "--device", "cpu", "--no-on-policy", "--best-of", "2",
    "--trainer-seed", "1",  # a second training seed: the study's files must say which seed each line is
]
FIT = ["--split", "lite-train", "--lora-rank", "8", "--lr", "5e-3", "--max-len", "512", "--device", "cpu",
       "--batch-size", "1"]


@pytest.fixture
def cli(capsys, monkeypatch):
    """The command line in this process, asserting success: its output, parsed when --json was asked."""
    run = command_line(None, capsys, monkeypatch)

    def succeed(*args):
        code, out, err = run(*args)
        assert code == 0, err
        return out

    return succeed


def first_questions(db) -> list:
    """The expert's first agent turn of each of its dialogues: a question for a hidden fact."""
    from sqlmodel import select

    from colbench.store import queries
    from colbench.store.models import Trajectory

    with db.read() as session:
        expert = session.exec(select(Trajectory).where(Trajectory.policy == "scripted:expert")).all()
        return [next(t for t in queries.turns_of(session, e.id) if t.role == "assistant") for e in expert]


def scripted_scores(db, checkpoint_id: int) -> dict[tuple[str, int], list[float]]:
    """(policy, task id) → the stored critic scores of the demonstrations' turns (the expert's and early@0's),
    by one critic checkpoint."""
    from sqlmodel import select

    from colbench.store import queries
    from colbench.store.models import Trajectory

    with db.read() as session:
        scripted = session.exec(
            select(Trajectory).where(Trajectory.policy.in_(["scripted:expert", "scripted:early@0"]))
        ).all()
        return {
            (t.policy, t.task_id): [score for scores in queries.critic_scores_of(session, t.id).values()
                                    for checkpoint, score in scores if checkpoint == checkpoint_id]
            for t in scripted
        }


def mean_logprob(engine: HFEngine, turn) -> float:
    """Mean log-prob per token of a stored agent turn's tokens after its stored prompt."""
    [logps] = engine.logprobs([turn.prompt], [turn.token_ids])
    return sum(logps) / len(logps)


def test_warm_start_learns_to_ask_and_the_study_runs_on_both_lite_test_sets(tiny_model_dir, tmp_path, cli, monkeypatch):
    db_url = f"sqlite:///{tmp_path / 'colbench.db'}"
    # Demonstrations: the expert on the first three train tasks (each template's instances are
    # spread over the tier, so these are three templates), and noisy agents for failures.
    for engine in ("scripted:expert", "scripted:early@0"):
        done = cli("--db", db_url, "rollout", "--engine", engine, "--tasks", "backend-lite:train", "--limit", "3",
                   "--sandbox", "bwrap", "--json")
        assert done["finished"] == 3 and done["success_rate"] == (1.0 if engine.endswith("expert") else 0.0)
    warm = cli("--db", db_url, "policy", "fit", "--algo", "sft", "--model", str(tiny_model_dir), "--epochs", "12", *FIT,
               "--json")
    assert warm["metrics"]["trajectories"] == 3  # the expert's successes, not early@0's failures

    # Learning: on each demonstrated dialogue's opening, asking for the first hidden fact became
    # far more likely than under the base model.
    db = Database(db_url)
    questions = first_questions(db)
    assert len(questions) == 3 and all(q.content.rstrip().endswith("?") for q in questions)
    base = HFEngine(str(tiny_model_dir), device="cpu")
    tuned = HFEngine(warm["checkpoint"], device="cpu", checkpoint_lookup=checkpoint_lookup(db))
    for question in questions:
        before, after = mean_logprob(base, question), mean_logprob(tuned, question)
        assert after > before + 1.0, (question.content, before, after)
    first_three = [spec_of(t) for t in select_tasks(db, "backend-lite:train", 3)]
    assert len({t.source for t in first_three}) == 3  # the first tasks of the split are spread over the templates

    # The study from the warm start: every arm trains (on the scripted data too, --no-on-policy)
    # and is evaluated on lite-test and lite-novel, best-of-N included.
    folder = tmp_path / "study"
    result = cli("--db", db_url, "experiment", "backend", "--model", warm["checkpoint"], "--dir", str(folder), "--json",
                 "--evaluate-on", "test", *STUDY)
    arms = {a["arm"]: a for a in result["arms"]}
    assert list(arms) == ["zero-shot", "rft", "mtdpo", "sweet", "sweet-no-c", "best-of-n"]
    for key, arm in arms.items():
        assert set(arm["tests"]) == {"lite-test", "lite-novel"}, key
        assert all(arm["tests"][split]["n_trajectories"] == 1 for split in arm["tests"]), (key, arm["training"])
    assert arms["best-of-n"]["training"]["critic"] == result["critics"]["with c"]["checkpoint"]
    critic = result["critics"]["with c"]["checkpoint"]
    assert all(
        f"best-of-2:{critic}" in arms["best-of-n"]["tests"][split]["setting"] for split in ("lite-test", "lite-novel")
    )
    assert all("best-of" not in arms["zero-shot"]["tests"][split]["setting"] for split in ("lite-test", "lite-novel"))
    # Each critic was judged on a scripted agent's test dialogues, whose turns' ground truth is known.
    for name in ("with c", "without c"):
        judged = result["critics"][name]["eval"]
        assert (
            judged["tasks"] == "backend:lite-test" and judged["trajectories"] == 2 and judged["labelled_turns"] >= 2
        ), judged
        # ... and the judgement is kept with the critic's run, where `runs show` finds it
        shown = cli("--db", db_url, "runs", "show", f"train:{result['critics'][name]['run_id']}", "--json")
        assert shown["metrics"]["eval"] == judged
    # Every run the study made carries its tag: the zero-shot, scripted-judge and test rollouts, both critics, every
    # policy.
    tagged = cli("--db", db_url, "runs", "ls", "--tag", "study:study", "--json")
    kinds = [r["what"] if r["kind"] == "train" else r["tasks"] for r in tagged]
    assert sorted(k for k in kinds if not k.startswith("backend:")) == [
        "critic", "critic", "policy:mtdpo", "policy:rft", "policy:sweet", "policy:sweet"
    ]
    assert {"backend:lite-train", "backend:lite-test", "backend:lite-novel"} <= set(kinds)
    assert not any(r["policy"] == "scripted:early@0" for r in tagged if r["kind"] == "rollout")  # made before the study
    # Each arm against zero-shot, paired on the same tasks: what `colbench compare` says of the two
    # rollout runs (best-of-N shares the zero-shot policy's name and differs in its setting).
    zero_shot = arms["zero-shot"]["tests"]
    run_of = {(r["policy"], r["setting"], r["tasks"]): r["ref"] for r in tagged if r["kind"] == "rollout"}
    for key, arm in arms.items():
        for split, versus in arm["vs_zero_shot"].items():
            if key == "zero-shot":
                assert versus is None
                continue
            mine = arm["tests"][split]
            assert (
                versus["mean_a"] == zero_shot[split]["success"]["mean"] and versus["mean_b"] == mine["success"]["mean"]
            )
            assert versus["n_tasks"] == 1
            runs = [
                run_of[(tests["policy"], tests["setting"], f"backend:{split}")] for tests in (zero_shot[split], mine)
            ]
            compared = cli("--db", db_url, "compare", *runs, "--json")
            assert compared["difference"]["mean"] == versus["difference"]["mean"] == versus["mean_b"] - versus["mean_a"]
            assert compared["p_value"] == versus["p_value"]
            if (
                zero_shot[split]["setting"] == mine["setting"]
            ):  # policies too: ckpt:<id> is a policy here, not its training run
                by_policy = cli("--db", db_url, "compare", zero_shot[split]["policy"], mine["policy"], "--tasks",
                                f"backend:{split}",
                                "--setting", mine["setting"], "--json")
                assert by_policy["difference"] == compared["difference"] and by_policy["b"].startswith(mine["policy"])
    markdown = (folder / "results.md").read_text()
    assert "judged on 2 dialogues of backend:lite-test" in markdown
    assert (
        "**backend:lite-test**" in markdown
        and "**backend:lite-novel**" in markdown
        and "| best-of-N with the critic |" in markdown
    )
    assert "success − zero-shot, paired (95% CI), p" in markdown

    # A rerun judges no critic again (minutes each at the study's scale): the judgement is read back from its run.
    def judged_again(*args, **kwargs):
        raise AssertionError("a critic was judged again")

    with monkeypatch.context() as patched:
        patched.setattr("colbench.training.critic_eval.evaluate_critic", judged_again)
        again = cli("--db", db_url, "experiment", "backend", "--model", warm["checkpoint"], "--dir", str(folder),
                    "--json", "--evaluate-on", "test", "--label", "final", *STUDY)
    judgements = {name: c["eval"] for name, c in result["critics"].items()}
    assert {name: c["eval"] for name, c in again["critics"].items()} == judgements
    # ... and trains no policy again: each LoRA policy continued the warm start's adapter, and is found by it.
    trained = {a["arm"]: a["training"].get("run_id") for a in result["arms"]}
    assert {a["arm"]: a["training"].get("run_id") for a in again["arms"]} == trained and trained["sweet"]
    # Under a label it keeps the study's files, among them what each SWEET-RL arm's pairs preferred, as
    # `critic pairs --grade` judges them against the built-in human and the sandbox.
    assert {r["seed"] for r in read_jsonl(folder / TRAJECTORIES)} == {1}
    recorded = {(r["arm"], r["label"]): r for r in read_jsonl(folder / PAIRS)}
    assert set(recorded) == {("sweet", "final"), ("sweet-no-c", "final")}
    for arm in ("sweet", "sweet-no-c"):
        run = next(a for a in again["arms"] if a["arm"] == arm)["training"]["run_id"]
        judged = cli("--db", db_url, "critic", "pairs", f"train:{run}", "--grade", "--sandbox", "bwrap", "--json")
        assert judged["pairs"] > 0 and recorded[(arm, "final")] == {"arm": arm, "label": "final", "seed": 1} | judged

    # A rerun under the same label keeps those lines: the same runs' pairs are not graded again.
    def graded_again(*args, **kwargs):
        raise AssertionError("a run's pairs were graded again")

    with monkeypatch.context() as patched:
        patched.setattr("colbench.families.lite_truth.pair_kinds", graded_again)
        cli("--db", db_url, "experiment", "backend", "--model", warm["checkpoint"], "--dir", str(folder),
            "--json", "--evaluate-on", "test", "--label", "final", *STUDY)
    assert {(r["arm"], r["label"]): r for r in read_jsonl(folder / PAIRS)} == recorded

    # The warm start's test dialogues and its best-of-N ones share its name; --setting tells them apart.
    critic = result["critics"]["with c"]["checkpoint"]
    both = cli("--db", db_url, "critic", "eval", "--critic", critic, "--policies", warm["checkpoint"], "--device",
               "cpu", "--json")
    plain = cli("--db", db_url, "critic", "eval", "--critic", critic, "--policies", warm["checkpoint"], "--device",
                "cpu",
                "--setting", zero_shot["lite-test"]["setting"], "--json")
    assert both["trajectories"] == 2 and plain["trajectories"] == 1

    # Critic evaluation against ground truth: the expert's fact questions are the labelled turns.
    for name, training_info in (("with c", True), ("without c", False)):
        figures = cli("--db", db_url, "critic", "eval", "--critic", result["critics"][name]["checkpoint"], "--tasks",
                      "backend-lite:train",
                      "--policies", "scripted:*", "--device", "cpu", "--json")
        assert figures["training_info"] is training_info
        assert figures["trajectories"] == 6 and figures["pairs"] == 3
        # The expert asks 2-3 facts then answers; early@0 answers at once: every asked fact is a labelled turn.
        assert figures["fact_turns"] == sum(len(facts_of(t)) for t in first_three)
        assert figures["labelled_turns"] == figures["fact_turns"] + 6
        assert 0.0 <= figures["pair_accuracy"] <= 1.0 and -1.0 <= figures["turn_spearman"] <= 1.0
        assert figures["auc_trajectories"] == 3 and 0.0 <= figures["turn_auc"] <= 1.0
        # Every expert question obtains a fact (no question to rank it against), and early@0's one-turn answer is
        # never as long as the expert's dialogue.
        assert figures["question_auc_trajectories"] == 0 and figures["same_length_pairs"] == 0
        # The advantages judged are the ones stored: they order the expert against early@0 as the pair accuracy says.
        stored = scripted_scores(db, int(figures["checkpoint"].removeprefix("ckpt:")))
        assert sum(len(turns) for turns in stored.values()) == figures["labelled_turns"]
        expert_won = [sum(stored[("scripted:expert", t)]) > sum(stored[("scripted:early@0", t)])
                      for t in {t for _, t in stored}]
        assert len(expert_won) == 3 and sum(expert_won) / 3 == pytest.approx(figures["pair_accuracy"])


def test_turn_credit_figures_by_hand():
    from colbench.training.critic_eval import ranks, spearman, within_trajectory_auc

    assert ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert spearman([1, 2, 3, 4], [0, 0, 1, 1]) == pytest.approx(0.894427, abs=1e-6)
    assert spearman([4, 3, 2, 1], [0, 0, 1, 1]) == pytest.approx(-0.894427, abs=1e-6)
    assert spearman([1, 1, 1], [0, 1, 0]) is None
    # Dialogue 1: the fact turn outranks both others (1.0); dialogue 2: one of two (0.5); dialogue 3 has no fact turn.
    scored = [(0.9, 1, 1), (0.1, 0, 1), (0.2, 0, 1), (0.3, 1, 2), (0.1, 0, 2), (0.5, 0, 2), (0.7, 0, 3)]
    assert within_trajectory_auc(scored) == (pytest.approx(0.75), 2)


def test_question_credit_leaves_answers_out_and_pairs_of_like_length_are_counted_apart():
    from colbench.families.lite_truth import ANSWER, NEW, NOTHING, REPEAT
    from colbench.training.critic_eval import describe, figures
    from colbench.training.data import Pair

    # Both dialogues rank their fact question above the other question but below the answer.
    advantages = {1: [0.5, 0.1, 0.9], 2: [0.1, 0.2, 0.6], 3: [0.3]}
    kinds = {1: [NEW, NOTHING, ANSWER], 2: [REPEAT, NEW, ANSWER], 3: [ANSWER]}
    # Σ_t A_t: 1.5, 0.9, 0.3. The one-turn dialogue loses to the three-turn one it beat; 1 and 2 are as long.
    pairs = [Pair(7, chosen=3, rejected=1), Pair(8, chosen=1, rejected=2)]
    judged = figures(advantages, pairs, kinds)
    assert judged["turn_auc"] == pytest.approx(0.5) and judged["auc_trajectories"] == 2
    assert judged["question_auc"] == pytest.approx(1.0) and judged["question_auc_trajectories"] == 2
    assert judged["labelled_turns"] == 7 and judged["fact_turns"] == 2
    assert (judged["pairs"], judged["pair_accuracy"]) == (2, 0.5)
    assert (judged["same_length_pairs"], judged["same_length_pair_accuracy"]) == (1, 1.0)
    assert "as long: 100.0% of 1" in describe(judged) and "among questions 1.00 (2 dialogues)" in describe(judged)
    # A judgement stored before these figures existed still reads.
    old = {k: v for k, v in judged.items() if not k.startswith(("same_length", "question"))}
    assert "as long" not in describe(old) and "within-dialogue AUC 0.50" in describe(old)


def test_the_first_tasks_of_each_lite_split_are_spread_over_its_templates(sqlite_url):
    db = Database(sqlite_url)
    seen = 50 - len(NOVEL_TEMPLATES)
    first = [template_of(spec_of(t)) for t in select_tasks(db, "backend-lite:train", seen)]
    assert len(set(first)) == seen
    novel = [template_of(spec_of(t)) for t in select_tasks(db, "backend-lite:novel", len(NOVEL_TEMPLATES))]
    assert set(novel) == NOVEL_TEMPLATES
