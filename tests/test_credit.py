"""Turn credit behind one interface (colbench/training/credit): each signal by hand on dialogues whose every
turn's truth is known (backend-lite with scripted agents), `credit eval` against that truth, and every consumer
(--ranker, --turn-credit) taking a plugin's credit without an edit to colbench."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colbench.training.credit import CREDITS, CreditConfig, CreditDialogue, State, candidate_values, make_credit
from colbench.training.credit import stored_dialogues, unstored_turn
from colbench.engines.scripted import IRRELEVANT_QUESTIONS, answer_text
from colbench.families.lite_truth import ANSWER, NEW, lite_dialogues
from colbench.simulators.rulebased.lite import DONT_KNOW
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import TrainingRun
from colbench.tasks.lite import facts_of
from tests.conftest import command_line

HERE = Path(__file__).parent
POLICIES = ("scripted:expert", "scripted:repeat@1", "scripted:irrelevant@1", "scripted:mixed@0.6")


@pytest.fixture
def cli(sqlite_url, capsys, monkeypatch):
    return command_line(sqlite_url, capsys, monkeypatch)


@pytest.fixture
def rolled(cli, sqlite_url) -> Database:
    """Dialogues on three backend-lite training tasks by agents that ask for facts, re-ask, ask what nothing
    answers, and answer early."""
    for policy in POLICIES:
        code, out, err = cli("rollout", "--engine", policy, "--tasks", "backend-lite:train", "--limit", "3",
                             "--sandbox", "bwrap", "--json")
        assert code == 0 and out["finished"] == 3, err
    return Database(sqlite_url)


def all_ids(db) -> list[int]:
    with db.read() as session:
        return [i for i, _ in queries.graded_trajectory_ids(session, family="backend", split="lite-train")]


def test_every_credit_says_what_it_reads_and_costs():
    for choice in CREDITS:
        assert isinstance(choice.training_info, bool) and choice.cost, choice.name
    assert {"critic", "infogain", "ref-infogain", "mc", "oracle", "random"} <= set(CREDITS.names())
    # The agent never sees the reference: only the signals that read it say so.
    assert not CREDITS.get("infogain").training_info and CREDITS.get("ref-infogain").training_info


def test_the_oracle_credit_is_lite_truth(rolled):
    ids = all_ids(rolled)
    dialogues = stored_dialogues(rolled, ids)
    truth = lite_dialogues(rolled, ids)
    oracle = make_credit("oracle", rolled, CreditConfig(sandbox="bwrap"))
    try:
        values = oracle.values(dialogues)
    finally:
        oracle.close()
    kinds_seen = set()
    for dialogue, row in zip(dialogues, values):
        kinds = truth[dialogue.trajectory_id].kinds
        kinds_seen |= set(kinds)
        assert len(row) == len(kinds)
        assert row[:-1] == [float(kind == NEW) for kind in kinds[:-1]]
        assert kinds[-1] == ANSWER and row[-1] == pytest.approx(dialogue.reward)  # its share of tests, graded again
    assert kinds_seen == {"new fact", "repeat", "nothing", "answer"}


def test_credit_eval_scores_the_oracle_one_and_chance_a_half(rolled, cli):
    code, rows, err = cli("credit", "eval", "--credit", "oracle", "--credit", "random", "--tasks",
                          "backend-lite:train", "--sandbox", "bwrap", "--json")
    assert code == 0, err
    oracle, chance = rows
    assert oracle["dialogues"] == chance["dialogues"] == 12
    assert oracle["question_auc"]["value"] == 1.0 and oracle["question_auc"]["n"] >= 3
    assert oracle["answer_accuracy"]["value"] == 1.0 and oracle["answer_accuracy"]["n"] >= 1
    assert chance["question_auc"]["low"] < 0.5 < chance["question_auc"]["high"]
    assert chance["question_auc"]["n"] == oracle["question_auc"]["n"]  # the same dialogues, judged apart
    code, text, _ = cli("credit", "eval", "--credit", "oracle", "--credit", "random", "--tasks", "backend-lite:train",
                        "--sandbox", "bwrap")
    assert code == 0 and "question AUC" in text and "1.00 [1.00, 1.00]" in text
    code, _, err = cli("credit", "eval", "--credit", "nonsense", "--tasks", "backend-lite:train")
    assert code != 0 and "unknown turn credit 'nonsense'" in err and "Traceback" not in err


def lite_dialogue(task, reply: str) -> CreditDialogue:
    """The task's opening, a question for its first fact, ``reply``, and a second question."""
    facts = facts_of(task)
    turns = [unstored_turn("user", task.problem_description), unstored_turn("assistant", facts[0].question),
             unstored_turn("user", reply), unstored_turn("assistant", facts[1].question)]
    return CreditDialogue(task, turns, task_id=1)


@pytest.fixture(scope="module")
def lite_task():
    from colbench.tasks.lite import lite_tasks

    return next(t for t in lite_tasks() if len(facts_of(t)) >= 2)


def test_infogain_is_nothing_for_the_placeholder_and_grows_with_a_reply(tiny_model_dir, lite_task):
    config = CreditConfig(model=str(tiny_model_dir), device="cpu", placeholder="(no reply)")
    credit = make_credit("infogain", None, config)
    try:
        same, stated = credit.values([lite_dialogue(lite_task, "(no reply)"),
                                      lite_dialogue(lite_task, facts_of(lite_task)[0].sentence)])
    finally:
        credit.close()
    assert same == [0.0, 0.0]  # the reply is the placeholder: the next action reads the same either way
    assert stated[0] > 1e-6 and stated[1] == 0.0  # the last question has no reply yet: no information


def test_a_candidates_credit_read_alone_is_its_value_in_the_whole_dialogue(tiny_model_dir, lite_task):
    """What a candidate is worth at its state (``last_values``, its own turn scored alone) is what ``values`` gives
    that turn; a dialogue ending on the human's reply makes infogain generate the next action itself."""
    config = CreditConfig(model=str(tiny_model_dir), scorer=str(tiny_model_dir), device="cpu")
    replied = lite_dialogue(lite_task, facts_of(lite_task)[0].sentence)
    ended = CreditDialogue(lite_task, replied.turns[:3], task_id=1)  # the reply is the last message
    for name in ("infogain", "ref-infogain"):
        credit = make_credit(name, None, config)
        try:
            whole = credit.values([replied, ended])
            alone = credit.last_values([replied, ended])
        finally:
            credit.close()
        assert alone == pytest.approx([row[-1] for row in whole], abs=1e-4), name
        assert ended and whole[1][0] != 0.0, name  # the generated next action read the reply


def test_the_scorer_reads_shared_prefixes_once_and_every_sequence_as_if_alone(tiny_model_dir):
    """ChatScorer.contrasts batches sequences over their shared prefix (its keys and values computed once): each
    table must be the one a plain forward pass over that sequence alone gives, and each triple's two tables must
    come back in its order, across batches (3 sequences a batch splits triples), with and without a shared prefix,
    and where a context is the shared prefix itself."""
    import torch

    from colbench.training.credit.signals import ChatScorer

    lm = ChatScorer(None, str(tiny_model_dir), CreditConfig(device="cpu", batch_size=3))
    prefix = lm.context("backend", [{"role": "user", "content": "Write a function f(x) for me."}])
    low = min(prefix) - 1 if min(prefix) > 0 else 1
    assert prefix[0] != low
    triples = [([low] + prefix, [low] + prefix + [11], [21, 22, 23]),
               (prefix, prefix + [12, 13], [24, 25]),
               (prefix + [14], prefix + [15], [26]),
               (prefix + [14, 16], prefix + [14], [27, 28])]
    seen = []
    lm.contrasts(triples, lambda a, b, target: seen.append((a, b, target)) or 0.0)

    def alone(context, target):
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([context + target])).logits[0]
        return torch.log_softmax(logits[len(context) - 1: len(context) + len(target) - 1].float(), dim=-1)

    assert len(seen) == len(triples)
    for a_context, b_context, target in triples:
        [(a, b)] = [(a, b) for a, b, t in seen if t == target]
        torch.testing.assert_close(a, alone(a_context, target), atol=2e-4, rtol=1e-4)
        torch.testing.assert_close(b, alone(b_context, target), atol=2e-4, rtol=1e-4)


def test_the_scorers_greedy_continuations_read_together_are_each_one_read_alone(tiny_model_dir):
    """infogain's next actions at candidates' states are generated --batch-size at a time, left-padded: each must be
    the continuation the context gets alone, also where its row stops at an end-of-sequence token while the rest of
    its batch goes on (a stop chosen here from one continuation's own tokens)."""
    from colbench.training.credit.signals import ChatScorer

    lm = ChatScorer(None, str(tiny_model_dir), CreditConfig(device="cpu", batch_size=3))
    contexts = [lm.context("backend", [{"role": "user", "content": "Write " + "a function " * n + "f(x) for me."}])
                for n in (1, 7, 3, 12, 5)]
    first = lm.greedy([contexts[0]], 12)[0]
    stop = next(t for p, t in enumerate(first) if p >= 2 and t not in first[:p])
    lm.model.generation_config.eos_token_id = stop
    alone = [lm.greedy([context], 12)[0] for context in contexts]
    assert alone[0][-1] == stop and len(alone[0]) < 12 and any(len(a) == 12 for a in alone)
    assert lm.greedy(contexts, 12) == alone


def test_ref_infogain_credits_a_stated_value_and_not_i_dont_know(lite_task):
    """The embedded model reads the reference after the dialogue: a reply stating a value the reference uses makes
    it likelier; "I don't know." about as likely as the placeholder."""
    credit = make_credit("ref-infogain", None, CreditConfig(device="cpu"))
    try:
        stated, unknown = credit.values([lite_dialogue(lite_task, facts_of(lite_task)[0].sentence),
                                         lite_dialogue(lite_task, DONT_KNOW)])
    finally:
        credit.close()
    assert stated[0] > 0.5, stated
    assert abs(unknown[0]) < stated[0] / 2, (stated, unknown)


def test_mc_values_are_the_mean_reward_of_their_continuations(rolled):
    """K continuations by a scripted agent that skips each fact with probability 0.5: each state's value is the mean
    of its continuations' graded rewards, a turn's credit the change of value across it, and the answer's own
    grade ends the dialogue."""
    ids = all_ids(rolled)
    dialogues = [d for d in stored_dialogues(rolled, ids) if len(d.agent_turns) >= 3][:3]
    assert len({d.task_id for d in dialogues}) > 1
    credit = make_credit("mc", rolled, CreditConfig(engine="scripted:skip@0.5", mc_samples=4, sandbox="bwrap"))
    batches, generate = [], credit.engine.generate
    credit.engine.generate = lambda conversations, params: batches.append(len(conversations)) or generate(
        conversations, params)
    try:
        rows = credit.values(dialogues)
        reads = credit.last
    finally:
        credit.close()
    for dialogue, row, read in zip(dialogues, rows, reads, strict=True):
        values, rewards = read["values"], read["rewards"]
        assert len(values) == len(row) + 1 and all(len(r) == 4 for r in rewards[:-1]) and len(rewards[-1]) == 1
        assert values == [pytest.approx(sum(r) / len(r)) for r in rewards]
        assert row == [pytest.approx(values[k + 1] - values[k]) for k in range(len(row))]
        assert rewards[-1] == [pytest.approx(dialogue.reward)]
    assert len({r for read in reads for state in read["rewards"] for r in state}) > 1  # a real sample
    # The dialogues' open states (all but each answered last) continue together: one engine call per round.
    assert batches[0] == 4 * sum(len(d.agent_turns) for d in dialogues)


def test_the_oracle_ranker_values_candidates_as_the_truth(rolled, tokenizer):
    """--ranker oracle at an expert dialogue's second turn (one fact known): a new fact 1, re-asking it or asking
    what nothing answers 0, an answer its share of tests; the same as SWEET's --score oracle."""
    from colbench.engines.base import Generation, Sample
    from colbench.training.config import PolicyConfig
    from colbench.training.sweet import CreditRanking, select_turns

    class Recipe:
        config = PolicyConfig(split="lite-train", fraction=1.0, ranker="oracle")
        device = "cpu"

    jobs, _, _ = select_turns(rolled, PolicyConfig(split="lite-train", fraction=1.0, policies="scripted:expert"),
                              None, tokenizer)
    trajectory = next(t for t in {j.trajectory_id for j in jobs} if sum(j.trajectory_id == t for j in jobs) >= 3)
    turns = sorted((j for j in jobs if j.trajectory_id == trajectory), key=lambda j: j.turn_id)
    [dialogue] = stored_dialogues(rolled, [trajectory])
    task = dialogue.task
    facts = facts_of(task)
    texts = [facts[0].question, facts[1].question, IRRELEVANT_QUESTIONS[0], answer_text(task.ground_truth),
             answer_text(task.naive_solution)]
    ranking = CreditRanking(rolled, Recipe(), turns, "unused")
    try:
        rows = ranking.score([turns[1]], [Generation("", 0, [Sample(t, [1, 2], [-1.0, -3.0]) for t in texts], 0.0)])
    finally:
        ranking.close()
    values = [row["score"] for row in rows[0]]
    assert values[:4] == [0.0, 1.0, 0.0, 1.0] and values[4] <= 0.6, values
    assert all(row["sampler_logp"] == -2.0 for row in rows[0])
    # The same through the interface every consumer uses.
    oracle = make_credit("oracle", rolled, CreditConfig(sandbox="bwrap"))
    try:
        assert candidate_values(oracle, [State(dialogue, 1, texts)]) == [values]
    finally:
        oracle.close()


def test_credit_sample_makes_the_same_state_pairs_credit_eval_scores(rolled, cli):
    """K candidates at every agent turn of the mixed agent's dialogues, each stored with its ground truth; pairs of
    a state whose truth differs ordered by credit eval (the oracle all of them, not swapped); the same command again
    is the same run, and a run stopped midway samples only what it lacks."""
    from sqlmodel import select

    from colbench.store.models import SweetCandidate

    flags = ("--tasks", "backend-lite:train", "--policies", "scripted:mixed@0.6", "--candidates", "4", "--sandbox",
             "bwrap", "--json")
    code, made, err = cli("credit", "sample", *flags)
    assert code == 0, err
    ids = [i for i in all_ids(rolled)]
    dialogues = [d for d in stored_dialogues(rolled, ids)]
    with rolled.read() as session:
        policy_of = {i: t.policy for i, t in queries.trajectories_by_id(session, ids).items()}
        stored = queries.candidates_of_run(session, made["run_id"])
    mixed = [d for d in dialogues if policy_of[d.trajectory_id] == "scripted:mixed@0.6"]
    states = [State(d, position, [c.content for c in stored[turn.id]]) for d in mixed
              for position, turn in enumerate(d.agent_turns)]
    assert made["dialogues"] == 3 and made["states"] == len(states) and made["sampled"] == len(states)
    assert all(len(s.candidates) == 4 for s in states)
    oracle = make_credit("oracle", rolled, CreditConfig(sandbox="bwrap"))
    try:
        truth = candidate_values(oracle, states)
    finally:
        oracle.close()
    stored_truth = [[c.score for c in stored[turn.id]] for d in mixed for turn in d.agent_turns]
    assert stored_truth == truth  # each candidate's score is its truth in the stored turn's place
    differing = sum(a != b for row in truth for i, a in enumerate(row) for b in row[i + 1:])
    assert made["pairs"] == differing > 0 and made["question_pairs"] > 0

    code, rows, err = cli("credit", "eval", "--credit", "oracle", "--credit", "random", "--tasks",
                          "backend-lite:train", "--pairs-from", made["run"], "--sandbox", "bwrap", "--json")
    assert code == 0, err
    oracle_row, chance = rows
    assert oracle_row["pair_accuracy"] == {**oracle_row["pair_accuracy"], "value": 1.0, "n": made["pairs"]}
    assert oracle_row["question_pair_accuracy"]["n"] == made["question_pairs"]
    assert oracle_row["question_pair_accuracy"]["value"] == 1.0 and chance["pair_accuracy"]["value"] < 1.0
    # The cost split between the dialogues' own turns (an online step's) and the candidates: they sum to the whole.
    turns, candidates = sum(len(d.agent_turns) for d in dialogues), 4 * len(states)
    for row in rows:
        assert row["seconds_per_dialogue_turn"] > 0 and row["seconds_per_candidate"] > 0
        assert row["seconds_per_dialogue_turn"] * turns + row["seconds_per_candidate"] * candidates == pytest.approx(
            row["seconds_per_turn"] * (turns + candidates))

    again = cli("credit", "sample", *flags)[1]
    assert again == {**made, "sampled": 0}  # the same run, nothing sampled
    # A run stopped midway (its process gone: failed, some states without candidates) goes on where it stopped.
    lost = sorted(stored)[: len(stored) // 2]
    with rolled.write() as session:
        for row in session.exec(select(SweetCandidate).where(SweetCandidate.run_id == made["run_id"])):
            if row.turn_id in lost:
                session.delete(row)
        queries.fail_run(session, made["run_id"], "killed")
    resumed = cli("credit", "sample", *flags)[1]
    assert resumed["run_id"] == made["run_id"] and resumed["sampled"] == len(lost) and resumed["pairs"] > 0
    with rolled.read() as session:
        assert session.get(TrainingRun, made["run_id"]).status == "done"
    code, _, err = cli("credit", "sample", "--tasks", "backend-lite:val", "--sandbox", "bwrap")
    assert code != 0 and "no graded backend-lite dialogues in backend-lite:val" in err and "Traceback" not in err


def test_credit_eval_stopped_midway_goes_on_where_it_stopped_and_again_scores_nothing(rolled, cli, monkeypatch):
    """Every value lands in the store as a chunk of dialogues (or states) is valued: a stop loses one chunk at most,
    the same command goes on with what it lacks and gives what an unstopped one gives, and other flags (another
    seed) are another credit's values, not these."""
    from colbench.training.credit.evaluate import CHUNK, evaluate_credits
    from colbench.training.credit.signals import RandomCredit

    code, made, err = cli("credit", "sample", "--tasks", "backend-lite:train", "--policies", "scripted:mixed@0.6",
                          "--candidates", "3", "--sandbox", "bwrap", "--json")
    assert code == 0, err
    config = CreditConfig(sandbox="bwrap", seed=3)
    everything = dict(tasks="backend-lite:train", pairs_from=made["run_id"])
    dialogues = stored_dialogues(rolled, all_ids(rolled))
    assert len(dialogues) > CHUNK  # the stop below falls between two chunks
    valued, real = [], RandomCredit.values

    def values(credit, chunk):
        valued.append(len(chunk))
        if len(valued) == 2 and stopping:
            raise KeyboardInterrupt  # Ctrl-C while the second chunk of dialogues is valued
        return real(credit, chunk)

    monkeypatch.setattr(RandomCredit, "values", values)
    stopping = True
    with pytest.raises(KeyboardInterrupt):
        evaluate_credits(rolled, ["random"], config, **everything)
    assert valued == [CHUNK, len(dialogues) - CHUNK]
    valued.clear()
    stopping = False
    [resumed] = evaluate_credits(rolled, ["random"], config, **everything)
    assert valued[0] == len(dialogues) - CHUNK  # only what the stop lost; then the candidates' dialogues
    assert [d["values"] for d in resumed.dialogues] == real(RandomCredit(3), dialogues)
    assert resumed.states and all(len(s["values"]) == len(s["truth"]) == 3 for s in resumed.states)
    valued.clear()
    [again] = evaluate_credits(rolled, ["random"], config, **everything)
    assert valued == [] and again.dialogues == resumed.dialogues and again.states == resumed.states
    assert again.seconds == pytest.approx(resumed.seconds)  # the work the values took, read back
    [other_seed] = evaluate_credits(rolled, ["random"], CreditConfig(sandbox="bwrap", seed=4), **everything)
    assert valued and [d["values"] for d in other_seed.dialogues] == real(RandomCredit(4), dialogues)
    assert other_seed.dialogues != resumed.dialogues

    from colbench.store.models import CreditValue
    from sqlmodel import select

    code, _, err = cli("runs", "rm", "rollout:1", "--yes")  # the expert's dialogues: their values go with them
    assert code == 0, err
    with rolled.read() as session:
        left = {row.turn_id for row in session.exec(select(CreditValue))}
        kept_turns = {turn.id for d in stored_dialogues(rolled, all_ids(rolled)) for turn in d.agent_turns}
    assert left and left <= kept_turns


def test_every_credit_side_by_side_in_one_command(rolled, cli, tiny_model_dir):
    """The credit-signals issue's command: the critic (fitted here with the reference), infogain, ref-infogain, mc
    and the oracle in one table over the same dialogues; the oracle orders questions perfectly and nothing else is
    asked to; the same command again reads every value back instead of scoring it."""
    tiny = str(tiny_model_dir)
    code, _, err = cli("critic", "fit", "--model", tiny, "--split", "lite-train", "--full", "--epochs", "1",
                       "--batch-size", "4", "--max-len", "512", "--lora-rank", "4", "--device", "cpu", "--name", "crit")
    assert code == 0, err
    command = ("credit", "eval", "--credit", "critic", "--credit", "infogain", "--credit", "ref-infogain", "--credit",
               "mc", "--credit", "oracle", "--model", tiny, "--engine", "scripted:skip@0.5", "--mc-samples", "2",
               "--tasks", "backend-lite:train", "--sandbox", "bwrap", "--device", "cpu", "--json")
    code, rows, err = cli(*command)
    assert code == 0, err
    assert [r["credit"] for r in rows] == ["critic", "infogain", "ref-infogain", "mc", "oracle"]
    assert {r["dialogues"] for r in rows} == {12} and len({r["question_auc"]["n"] for r in rows}) == 1
    assert [r["training_info"] for r in rows] == [True, False, True, True, True]
    assert rows[-1]["question_auc"]["value"] == 1.0
    assert all(r["question_auc"]["value"] is not None and r["seconds_per_turn"] > 0 for r in rows)
    assert cli(*command)[1] == rows  # every value and its seconds read back from the store


def untimed(figures: dict) -> dict:
    """A credit's figures less its seconds, which two runs of the same values never share."""
    return {k: v for k, v in figures.items() if not k.startswith("seconds_per_")}


def test_the_study_report_recomputes_credit_evals_figures_from_the_values_file(rolled, cli, tmp_path):
    """`credit eval --values-out` keeps every value beside its truth; `study report` on the folder prints the same
    figures with no store, a table of every credit on the subset one of them was scored on, and a credit scored in
    parts (a command per policy) as one."""
    values = tmp_path / "values.jsonl"
    code, full, err = cli("credit", "eval", "--credit", "random", "--credit", "oracle", "--tasks",
                          "backend-lite:train", "--sandbox", "bwrap", "--json")
    assert code == 0, err
    for selection in (("--credit", "random"), ("--credit", "oracle", "--task-limit", "2")):
        code, scored, err = cli("credit", "eval", *selection, "--tasks", "backend-lite:train", "--sandbox", "bwrap",
                                "--values-out", str(values), "--json")
        assert code == 0, err
    assert scored[0]["dialogues"] == 8 < full[1]["dialogues"] == 12  # 4 policies x the first 2 tasks
    code, report, err = cli("study", "report", str(tmp_path), "--json")
    assert code == 0, err
    everyone, on_subset = report["tables"]
    by_name = {f["credit"]: f for f in everyone["figures"]}
    assert untimed(by_name["random"]) == untimed(full[0])
    assert untimed(by_name["oracle"]) == untimed(scored[0])
    assert on_subset["dialogues"] == 8 and {f["credit"] for f in on_subset["figures"]} == {"random", "oracle"}
    assert report["carried"]["credit"] is None  # only the controls were scored: nothing to carry
    code, text, _ = cli("study", "report", str(tmp_path))
    assert code == 0 and "| oracle | yes |" in text and "**Carried online**: nothing" in text

    # cost.jsonl (the signals valued again alone on a subset): its seconds are the cost column, the others' stay.
    code, alone, err = cli("credit", "eval", "--credit", "random", "--tasks", "backend-lite:train", "--task-limit",
                           "1", "--seed", "5", "--sandbox", "bwrap", "--values-out", str(tmp_path / "cost.jsonl"),
                           "--json")
    assert code == 0, err
    code, costed, err = cli("study", "report", str(tmp_path), "--json")
    assert code == 0, err
    by_name = {f["credit"]: f for f in costed["tables"][0]["figures"]}
    assert by_name["random"]["seconds_per_turn"] == pytest.approx(alone[0]["seconds_per_turn"])
    assert by_name["random"]["seconds_per_turn"] != everyone["figures"][0]["seconds_per_turn"]
    assert by_name["oracle"] == everyone["figures"][1] and costed["cost_measured_alone"] == ["random"]

    parts = tmp_path / "parts"
    parts.mkdir()
    for policies in (",".join(POLICIES[:2]), ",".join(POLICIES[2:])):
        code, _, err = cli("credit", "eval", "--credit", "oracle", "--tasks", "backend-lite:train", "--policies",
                           policies, "--sandbox", "bwrap", "--values-out", str(parts / "values.jsonl"), "--json")
        assert code == 0, err
    [table] = cli("study", "report", str(parts), "--json")[1]["tables"]
    [oracle] = table["figures"]
    assert untimed(oracle) == untimed(full[1])


def test_a_cost_measured_in_repeats_is_their_mean_with_their_range(tmp_path):
    """cost.jsonl may hold several repeats of the cost probe (each row tagged with its ``repeat``): a signal's cost is
    the mean of its repeats' seconds per turn and their range its interval; a repeat's rows are not merged with
    another's (two repeats of 4 turns are 4 turns twice, not 8 turns)."""
    from colbench.jsonl import write_jsonl
    from colbench.training.credit.evaluate import CreditValues
    from colbench.training.credit.report import credit_report, markdown

    def valued(credit, seconds):
        dialogue = {"trajectory": 1, "task": 1, "reward": 1.0, "kinds": ["new fact", "new fact", "repeat", "answer"],
                    "values": [0.4, 0.3, 0.1, 0.2]}
        return CreditValues(credit, False, "", seconds, [dialogue]).rows()

    write_jsonl(tmp_path / "values.jsonl", valued("random", 100.0) + valued("oracle", 100.0))
    write_jsonl(tmp_path / "cost.jsonl", [row | {"repeat": repeat} for repeat, seconds in ((1, 0.4), (2, 1.2), (3, 0.8))
                                         for row in valued("random", seconds)])
    found = credit_report(tmp_path)
    by_name = {f.credit: f for f in found["tables"][0].figures}
    assert by_name["random"].seconds_repeats == pytest.approx([0.1, 0.3, 0.2])  # 4 turns a repeat
    assert by_name["random"].seconds_per_turn == pytest.approx(0.2)
    assert by_name["oracle"].seconds_per_turn == pytest.approx(25.0) and by_name["oracle"].seconds_repeats == []
    assert "| 0.200 [0.100, 0.300] |" in markdown(found) and "| 25.000 |" in markdown(found)
    assert found["cost_measured_alone"] == ["random"]
    assert by_name["random"].seconds_per_dialogue_turn is None  # these repeats did not record the split


def test_a_cost_split_by_dialogue_turn_and_candidate_is_read_back_and_averaged_over_repeats(tmp_path):
    """A credit's seconds split between a dialogue's turns (what an online step values) and same-state candidates
    (what a ranker values), kept in the summary row: read back as a per-turn and a per-candidate cost, summed over a
    credit scored in parts, averaged over a cost file's repeats; unknown (None) if any part did not record it."""
    from colbench.jsonl import write_jsonl
    from colbench.training.credit.evaluate import CreditValues
    from colbench.training.credit.report import credit_report

    dialogue = {"trajectory": 1, "task": 1, "reward": 1.0, "kinds": ["new fact", "answer"], "values": [0.4, 0.2]}
    state = {"trajectory": 1, "turn": 7, "task": 1, "answers": [False] * 4, "truth": [1.0, 0.0, 0.0, 1.0],
             "values": [0.3, 0.1, 0.2, 0.4]}

    def valued(credit, seconds, candidate_seconds):
        return CreditValues(credit, False, "", seconds, [dialogue], [state], candidate_seconds).rows()

    # 2 turns and 4 candidates: 6 s of which 4 on candidates is 1 s a turn and 1 s a candidate.
    [one] = CreditValues.from_rows(valued("infogain", 6.0, 4.0))
    assert one.seconds_split() == pytest.approx((1.0, 1.0)) and one.figures().seconds_per_turn == pytest.approx(1.0)
    # Scored in two parts: the parts' seconds sum (a candidate's 4 + 2 s over 4 candidates, turns' 2 + 2 s over 2).
    [parts] = CreditValues.from_rows(valued("infogain", 6.0, 4.0) + valued("infogain", 4.0, 2.0)[:1])
    assert parts.seconds_split() == pytest.approx((2.0, 1.5))
    [unknown] = CreditValues.from_rows(valued("infogain", 6.0, 4.0) + valued("infogain", 4.0, None)[:1])
    assert unknown.seconds_split() == (None, None)

    write_jsonl(tmp_path / "values.jsonl", valued("infogain", 60.0, 40.0))
    write_jsonl(tmp_path / "cost.jsonl", [row | {"repeat": repeat} for repeat, (total, candidates) in
                                          ((1, (6.0, 4.0)), (2, (10.0, 4.0))) for row in valued("infogain", total,
                                                                                                candidates)])
    [figures] = credit_report(tmp_path)["tables"][0].figures
    assert figures.seconds_per_turn == pytest.approx((1.0 + 10.0 / 6) / 2)
    assert figures.seconds_per_dialogue_turn == pytest.approx((1.0 + 3.0) / 2)  # the repeats', not the scoring run's
    assert figures.seconds_per_candidate == pytest.approx(1.0)


def signal(name, value, low, high, seconds=0.1):
    """A credit's figures with only its question pair accuracy (and cost) filled: what the plan's rules read."""
    from colbench.training.credit.evaluate import CreditFigures, Figure

    none = Figure(None)
    return CreditFigures(name, False, "", 10, 40, none, none, none, none, seconds,
                         question_pair_accuracy=Figure(value, low, high, 100))


def test_the_plans_rule_carries_the_best_question_pairs_or_the_cheaper_of_two_that_overlap():
    from colbench.training.credit.report import carried

    chance = signal("random", 0.50, 0.45, 0.55, 0.0)
    truth = signal("oracle", 1.0, 1.0, 1.0, 0.0)
    assert carried([chance, truth, signal("critic", 0.61, 0.56, 0.66, 0.1),
                    signal("infogain", 0.75, 0.70, 0.80, 0.5)])["credit"] == "infogain"
    # Overlapping intervals: the cheaper is carried.
    assert carried([chance, signal("critic", 0.72, 0.66, 0.78, 0.1),
                    signal("infogain", 0.75, 0.70, 0.80, 0.5)])["credit"] == "critic"
    # A best that does not clear random's upper bound: nothing.
    found = carried([chance, signal("critic", 0.58, 0.52, 0.64, 0.1)])
    assert found["credit"] is None and "does not clear random" in found["why"]


def test_the_plans_question_needs_a_lower_bound_above_61_and_above_the_critic_measured_here():
    from colbench.training.credit.report import answer

    chance, truth = signal("random", 0.50, 0.45, 0.55), signal("oracle", 1.0, 1.0, 1.0)
    signals = [signal("infogain", 0.70, 0.64, 0.76), signal("ref-infogain", 0.80, 0.75, 0.85)]
    assert answer([chance, truth, *signals])["better"] is None  # no critic scored: the question waits
    # The critic measured below study 3's 61%: the bar is 61%, and only a lower bound above it counts.
    assert answer([chance, truth, signal("critic:ckpt:critic", 0.55, 0.50, 0.60), *signals,
                   signal("critic:ckpt:critic-noc", 0.60, 0.55, 0.66)])["better"] == ["infogain", "ref-infogain"]
    # The critic measured above 61%: its figure is the bar.
    assert answer([chance, truth, signal("critic:ckpt:critic", 0.70, 0.65, 0.75), *signals])["better"] == [
        "ref-infogain"]


# ---------------------------------------------------------------- a plugin's credit everywhere


def plugged(db_url: str, *args, timeout=900):
    path = os.pathsep.join(p for p in (str(HERE / "plugin_package"), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run([sys.executable, "-m", "colbench.cli.app", "--db", db_url, *args], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=path, NO_COLOR="1"), timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout) if "--json" in args else done.stdout


def test_a_plugin_credit_ranks_sweet_pairs_and_is_scored_and_credits_online_turns(rolled, sqlite_url, tiny_model_dir):
    """The test plugin's short-turns credit (minus a turn's words), with no edit to colbench: listed, scored by
    credit eval, ranking SWEET's candidates (every stored pair's chosen candidate is the shorter: not swapped), and
    as online RL's --turn-credit."""
    listed = plugged(sqlite_url, "credit", "ls", "--json")
    assert {"name": "short-turns", "training_info": False, "cost": "none",
            "help": "a plugin's credit: minus the turn's length in words"} in listed
    [scored] = plugged(sqlite_url, "credit", "eval", "--credit", "short-turns", "--tasks", "backend-lite:train",
                       "--json")
    assert scored["dialogues"] == 12 and scored["question_auc"]["n"] >= 3
    fitted = plugged(sqlite_url, "policy", "fit", "--algo", "sweet", "--ranker", "short-turns", "--model",
                     str(tiny_model_dir), "--split", "lite-train", "--candidates", "4", "--max-new-tokens", "24",
                     "--lora-rank", "4", "--max-len", "512", "--epochs", "1", "--device", "cpu", "--json")
    with Database(sqlite_url).read() as session:
        pairs = queries.sweet_pairs_of(session, fitted["run_id"])
    assert pairs
    for chosen, rejected, _ in pairs:
        assert len(chosen.content.split()) < len(rejected.content.split()), (chosen.content, rejected.content)
        assert chosen.score > rejected.score
    online = plugged(sqlite_url, "policy", "fit", "--algo", "grpo", "--tasks", "brevity:train", "--model",
                     str(tiny_model_dir), "--steps", "1", "--tasks-per-step", "1", "--group", "4", "--max-new-tokens",
                     "4", "--batch-size", "4", "--lora-rank", "4", "--turn-credit", "short-turns", "--device", "cpu",
                     "--json")
    with Database(sqlite_url).read() as session:
        run = session.get(TrainingRun, online["run_id"])
    assert run.status == "done" and run.config["turn_credit"] == "short-turns"


def test_infopo_fusion_opens_its_gate_only_where_the_outcome_cannot_tell_dialogues_apart():
    """Two groups of two dialogues: one all wrong (no spread: the gate half open), one right and wrong (closed).
    Within the open group the turn that gained more information gets more credit; a turn valued 0 gets none."""
    from colbench.online_rl import variance_gated_credit

    values = [[2.0, 0.0], [1.0, 0.0], [2.0, 0.0], [1.0, 0.0]]
    tokens = [[5, 5]] * 4
    credit = variance_gated_credit(values, tokens, advantages=[0.0, 0.0, 0.7, -0.7], rewards=[0.0, 0.0, 1.0, 0.0],
                                   groups=[0, 0, 1, 1], weight=1.0, temperature=0.05)
    assert credit[0][0] > 0 > credit[1][0] and credit[0][0] == pytest.approx(-credit[1][0])
    assert credit[0][1] == credit[1][1] == 0.0
    assert abs(credit[2][0]) < 1e-4 and abs(credit[3][0]) < 1e-4  # the outcome already ranks them: gate closed
