"""Scripted agents (colbench/engines/scripted.py) through the real rollout, store, sandbox and CLI,
on backend-lite tasks (colbench/tasks/lite) with the built-in simulated human."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from sqlmodel import select

from colbench import protocol
from colbench.engines import EngineError, make_engine
from colbench.engines.base import SamplingParams
from colbench.engines.scripted import POLICIES, ScriptedEngine, answer_text, naive_code
from colbench.families.backend import BACKEND_SYSTEM_PROMPT, BackendEnv
from colbench.grading.grader import Grader
from colbench.official import task_row
from colbench.rollout import Rollout
from colbench.rollout_config import RolloutConfig
from colbench.simulators.rulebased.backend import BuiltinSimulator
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task, Trajectory
from colbench.tasks import lite
from colbench.tasks.lite import HiddenFact, facts_of
from colbench.tasks.spec import TaskSpec
from colbench.training.sequences import agent_turns, end_of_turn_ids, pack

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
SYSTEM = {"role": "system", "content": BACKEND_SYSTEM_PROMPT.format(turns=protocol.MAX_AGENT_TURNS)}
DONT_KNOW = "I don't know"


def chosen_specs(n: int = 5) -> list[TaskSpec]:
    """n lite train tasks, one per template, with every number of facts there is among them."""
    firsts: dict[str, TaskSpec] = {}
    for task in lite.lite_tasks():
        if task.split == "train":
            firsts.setdefault(task.source, task)
    by_count: dict[int, TaskSpec] = {}
    for task in firsts.values():
        by_count.setdefault(len(facts_of(task)), task)
    picked = list(by_count.values())
    picked += [task for task in firsts.values() if task not in picked]
    return picked[:n]


def outside_task() -> TaskSpec:
    """A task in the lite format that is not one of lite_tasks() (as one imported into a store would be)."""
    facts = [
        HiddenFact("grace", "The first 3 days late are free.", "How many late days are free?", ("free", "grace")),
        HiddenFact("fee", "Each further day costs 4 dollars.", "How much does each later day cost?",
                   ("cost", "dollar")),
    ]
    return TaskSpec(
        family="backend",
        split="train",
        source="lite:late_fee",
        problem_description=(
            "Compute the fee for a library book returned late. The signature of the function is: def late_fee(days)"
        ),
        ground_truth="def late_fee(days):\n    return max(0, days - 3) * 4\n",
        test_cases={f"test{k}": f"late_fee({k * 2})" for k in range(1, 6)},
        hidden_information=lite.hidden_information(facts),
        naive_solution="def late_fee(days):\n    return days\n",
    )


def engine(policy: str, specs=None) -> ScriptedEngine:
    return make_engine("scripted", policy, tasks=specs)


# ---------------------------------------------------------------- running rollouts


@pytest.fixture(scope="module")
def env():
    with Grader(sandbox="bwrap", workers=2) as grader:
        yield BackendEnv(grader)


def store(tmp_path, name: str = "colbench.db") -> tuple[Database, list[Task]]:
    db = Database(f"sqlite:///{tmp_path / name}")
    with db.write() as session:
        queries.add_tasks(session, [task_row(spec) for spec in chosen_specs()])
    with db.read() as session:
        return db, list(session.exec(select(Task).order_by(Task.id)))


def roll(tmp_path, env, policy: str, *, seed: int = 0, k: int = 1, name: str = "colbench.db"):
    """Roll ``policy`` out on the chosen tasks in a fresh store; every trajectory with its turns."""
    db, tasks = store(tmp_path, name)
    specs = chosen_specs()
    stats = Rollout(db, engine(policy, specs), BuiltinSimulator(), env,
                    RolloutConfig(seed=seed, samples_per_task=k)).run(tasks)
    assert stats.graded == len(tasks) * k
    with db.read() as session:
        trajectories = list(session.exec(select(Trajectory).order_by(Trajectory.id)))
        found = [(t, queries.turns_of(session, t.id)) for t in trajectories]
    by_id = {task.id: spec for task, spec in zip(tasks, specs)}
    return [(trajectory, turns, by_id[trajectory.task_id]) for trajectory, turns in found]


def dialogue(turns) -> list[tuple[str, str]]:
    return [(t.role, t.content) for t in turns]


def asked(turn_text: str, facts) -> list[str]:
    return [f.name for f in facts if f.question in turn_text]


# ---------------------------------------------------------------- the policies, end to end


def test_expert_solves_every_task_asking_once_per_fact(tmp_path, env):
    tokenizer = ScriptedEngine("expert", tokenizer="smollm2").tokenizer
    end = end_of_turn_ids(tokenizer)
    assert end  # SmolLM2 closes a turn with <|im_end|>
    for trajectory, turns, spec in roll(tmp_path, env, "expert"):
        facts = facts_of(spec)
        agent = [t for t in turns if t.role == "assistant"]
        assert trajectory.policy == "scripted:expert"
        assert trajectory.reward == 1.0 and trajectory.success, (spec.source, trajectory.answer)
        assert len(agent) == len(facts) + 1
        # One question per turn, every fact once, in order; the human tells each.
        assert [asked(t.content, facts) for t in agent[:-1]] == [[f.name] for f in facts]
        replies = [t.content for t in turns if t.role == "user"][1:]
        assert all(f.sentence in reply for f, reply in zip(facts, replies))
        assert agent[-1].content == answer_text(spec.ground_truth)
        assert protocol.strip_code_fences(trajectory.answer) == spec.ground_truth.strip()

        # Stored like a model's turns: the chat-templated prompt of exactly the dialogue so far,
        # and token ids that decode to the turn's text followed by the end-of-turn token.
        for turn in agent:
            history = [{"role": t.role, "content": t.content} for t in turns[: turn.index]]
            assert turn.prompt == tokenizer.apply_chat_template([SYSTEM, *history], tokenize=False,
                                                                add_generation_prompt=True)
            assert turn.prompt_tokens == len(tokenizer(turn.prompt, add_special_tokens=False)["input_ids"])
            assert turn.token_ids[-len(end):] == end
            assert tokenizer.decode(turn.token_ids[: -len(end)]) == turn.raw == turn.content
            assert turn.completion_tokens == len(turn.token_ids)
            assert turn.logprob_sum == 0.0 and turn.logprob_mean == 0.0
        # What the trainers read (training/sequences.py): the stored ids, and the whole dialogue
        # as one row, every later prompt continuing exactly the tokens of the turns before it.
        read = agent_turns(tokenizer, "backend", turns)
        assert [t.completion_ids for t in read] == [t.token_ids for t in agent]
        assert len(pack(read)) == 1


@pytest.mark.parametrize("policy", ["skip@1.0", "early@0"])
def test_answering_without_the_facts_gives_the_naive_solution_and_fails(tmp_path, env, policy):
    for trajectory, turns, spec in roll(tmp_path, env, policy):
        agent = [t for t in turns if t.role == "assistant"]
        assert len(agent) == 1  # no question at all: it answers at once
        assert agent[0].content == answer_text(spec.naive_solution)
        assert not trajectory.success and trajectory.reward < 1.0


def test_early_answers_after_k_questions(tmp_path, env):
    for trajectory, turns, spec in roll(tmp_path, env, "early@1"):
        facts = facts_of(spec)
        agent = [t for t in turns if t.role == "assistant"]
        assert len(agent) == 2 and asked(agent[0].content, facts) == [facts[0].name]
        complete = len(facts) == 1
        assert agent[1].content == answer_text(spec.ground_truth if complete else spec.naive_solution)
        assert bool(trajectory.success) == complete


def test_irrelevant_questions_get_dont_know_and_the_agent_still_succeeds(tmp_path, env):
    for trajectory, turns, spec in roll(tmp_path, env, "irrelevant@1"):
        facts = facts_of(spec)
        agent = [t for t in turns if t.role == "assistant"]
        questions = agent[:-1]
        off_topic = [i for i, t in enumerate(questions) if not asked(t.content, facts)]
        # One irrelevant question before each fact (the turn limit has room here), each answered "I don't know".
        assert len(off_topic) == len(facts) and len(questions) == 2 * len(facts)
        assert [n for t in questions for n in asked(t.content, facts)] == [f.name for f in facts]
        for i in off_topic:
            reply = turns[questions[i].index + 1]
            assert reply.role == "user" and DONT_KNOW in reply.content, reply.content
        assert trajectory.reward == 1.0 and trajectory.success


def test_repeat_asks_for_each_fact_twice_and_still_succeeds(tmp_path, env):
    for trajectory, turns, spec in roll(tmp_path, env, "repeat@1"):
        facts = facts_of(spec)
        twice = [fact for fact in facts for _ in range(2)]
        agent = [t for t in turns if t.role == "assistant"]
        # Each fact asked twice in a row (the turn limit has room here), the human stating it both times.
        assert [asked(t.content, facts) for t in agent[:-1]] == [[fact.name] for fact in twice]
        replies = [t.content for t in turns if t.role == "user"][1:]
        assert all(fact.sentence in reply for fact, reply in zip(twice, replies))
        assert trajectory.reward == 1.0 and trajectory.success


def test_repeat_leaves_room_for_every_fact_within_the_turn_limit():
    many = [
        HiddenFact(f"f{i}", f"Fact {i} is {i}.", f"What is the value of setting {i}?", (f"setting{i}",))
        for i in range(6)
    ]
    spec = outside_task()
    agent = engine("repeat@1", [spec])
    agent._facts = lambda task: many
    messages = conversation(spec)
    while True:
        [generation] = agent.generate([messages], SamplingParams())
        text = generation.samples[0].text
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "ok"}]
        if protocol.ANSWER_MARKER in text:
            break
    said = [m["content"] for m in messages if m["role"] == "assistant"]
    # Six facts and the answer need 7 of the 10 turns: 3 repeats fit, and every fact is still asked.
    assert len(said) == protocol.MAX_AGENT_TURNS
    assert all(any(fact.question in text for text in said) for fact in many)
    assert said[-1] == answer_text(spec.ground_truth)


def test_same_seed_same_dialogues_another_seed_others(tmp_path, env):
    first = roll(tmp_path, env, "mixed", seed=0, k=2, name="a.db")
    again = roll(tmp_path, env, "mixed", seed=0, k=2, name="b.db")
    other = roll(tmp_path, env, "mixed", seed=1, k=2, name="c.db")
    assert [dialogue(turns) for _, turns, _ in first] == [dialogue(turns) for _, turns, _ in again]
    assert [t.reward for t, _, _ in first] == [t.reward for t, _, _ in again]
    assert [dialogue(turns) for _, turns, _ in first] != [dialogue(turns) for _, turns, _ in other]
    # The mix varies within one rollout too: the two samples of a task differ somewhere, and
    # some dialogues end with the reference and some with the naive solution.
    assert any(dialogue(a[1]) != dialogue(b[1]) for a, b in zip(first[::2], first[1::2]))
    endings = {protocol.strip_code_fences(t.answer) == spec.ground_truth.strip() for t, _, spec in first + other}
    assert endings == {True, False}


# ---------------------------------------------------------------- the engine on its own


def conversation(spec: TaskSpec, *exchanges: tuple[str, str]) -> list[dict]:
    messages = [SYSTEM, {"role": "user", "content": spec.problem_description}]
    for agent, reply in exchanges:
        messages += [{"role": "assistant", "content": agent}, {"role": "user", "content": reply}]
    return messages


def test_each_seed_is_its_own_and_samples_are_independent():
    specs = chosen_specs()
    spec = max(specs, key=lambda s: len(facts_of(s)))
    skip = engine("skip@0.5", specs)
    texts = {
        seed: skip.generate([conversation(spec)], SamplingParams(seed=seed))[0].samples[0].text for seed in range(12)
    }
    assert texts == {
        seed: skip.generate([conversation(spec)], SamplingParams(seed=seed))[0].samples[0].text for seed in range(12)
    }
    assert len(set(texts.values())) > 1
    many = skip.generate([conversation(spec)], SamplingParams(seed=0, n=8))[0]
    assert len(many.samples) == 8 and len({s.text for s in many.samples}) > 1


def test_max_new_tokens_cuts_the_answer_like_a_models():
    specs = chosen_specs()
    spec = specs[0]
    done = [(f.question, f.sentence) for f in facts_of(spec)]
    full = engine("expert", specs).generate([conversation(spec, *done)], SamplingParams())[0].samples[0]
    assert full.finish_reason == "stop" and full.text == answer_text(spec.ground_truth)
    cut = engine("expert", specs).generate([conversation(spec, *done)], SamplingParams(max_new_tokens=5))[0].samples[0]
    assert (
        cut.finish_reason == "length"
        and len(cut.token_ids) == 5
        and full.text.startswith(cut.text)
        and cut.text != full.text
    )


def test_without_a_tokenizer_the_prompt_is_plain_and_there_are_no_ids():
    specs = chosen_specs()
    plain = ScriptedEngine("expert", tasks=specs, tokenizer=None)
    generation = plain.generate([conversation(specs[0])], SamplingParams())[0]
    assert generation.prompt_text.startswith("[system]\n") and generation.prompt_text.endswith("[assistant]\n")
    assert generation.samples[0].token_ids == [] and facts_of(specs[0])[0].question in generation.samples[0].text


def test_naive_code_without_a_naive_solution_keeps_the_signature():
    spec = chosen_specs()[0]
    code = naive_code(replace(spec, naive_solution=None))
    assert code.splitlines()[0] == next(line for line in spec.ground_truth.splitlines() if line.startswith("def "))
    assert "return None" in code


def test_on_every_lite_task_the_human_reads_each_question_as_meant():
    """Over the whole tier: every fact question (with any lead-in) asks for exactly its fact, and
    no irrelevant question asks for any, as the built-in human reads them."""
    from colbench.engines.scripted import FIRST_LEAD_INS, IRRELEVANT_QUESTIONS, LEAD_INS
    from colbench.simulators.rulebased.lite import revealed_facts

    wrong = []
    for task in lite.lite_tasks():
        wrong += [(task.source, q) for q in IRRELEVANT_QUESTIONS if revealed_facts(task, q)]
        for fact in lite.facts_of(task):
            wrong += [(task.source, lead + fact.question) for lead in set(LEAD_INS + FIRST_LEAD_INS)
                      if revealed_facts(task, lead + fact.question) != [fact.name]]
    assert wrong == []


# ---------------------------------------------------------------- names and errors


def test_policy_names_knobs_and_the_engine_flag():
    assert make_engine("scripted", "expert", device="cpu", checkpoint_lookup=None).model_ref == "scripted:expert"
    assert make_engine("scripted:skip@0.25", "smollm2").model_ref == "scripted:skip@0.25"
    assert make_engine("scripted", "skip").model_ref == "scripted:skip@0.5"
    assert make_engine("scripted", "early@3").model_ref == "scripted:early@3"
    assert make_engine("scripted", "repeat").model_ref == "scripted:repeat@0.5"
    assert make_engine("scripted:mixed", "ignored").kind == "scripted"
    # The rollout takes scripted:<policy>, knob included; the policy itself is checked by the engine.
    assert RolloutConfig(engine="scripted:skip@0.5").engine == "scripted:skip@0.5"
    assert RolloutConfig(engine="scripted", model="skip@0.5").engine == "scripted"  # the policy as --model
    with pytest.raises(ValueError, match="scripted:<policy>"):
        RolloutConfig(engine="script:expert")


@pytest.mark.parametrize("spec, fragment", [
    ("smollm2", "unknown scripted policy 'smollm2'"),
    ("genius", "unknown scripted policy 'genius'"),
    ("skip@1.5", "probability in [0, 1]"),
    ("early@1.5", "whole number"),
    ("expert@2", "takes no @ knob"),
])
def test_bad_policy_is_one_line_listing_the_policies(spec, fragment):
    with pytest.raises(EngineError) as caught:
        make_engine("scripted", spec)
    message = str(caught.value)
    assert fragment in message and "\n" not in message
    if "unknown" in fragment:
        assert all(name in message for name in POLICIES)


def test_tasks_given_to_the_engine_are_recognised_and_solved(tmp_path, env):
    outside = outside_task()
    with pytest.raises(EngineError, match="not the description of a backend-lite task"):
        engine("expert").generate([[SYSTEM, {"role": "user", "content": outside.problem_description}]],
                                  SamplingParams())
    db = Database(f"sqlite:///{tmp_path / 'outside.db'}")
    with db.write() as session:
        queries.add_tasks(session, [task_row(outside)])
    with db.read() as session:
        tasks = list(session.exec(select(Task)))
    stats = Rollout(db, engine("expert", [outside]), BuiltinSimulator(), env, RolloutConfig()).run(tasks)
    assert stats.success_rate == 1.0 and stats.agent_turns == 3
    # A task that is not in the lite format has no facts to ask for: refused, not answered outright.
    builtin = TaskSpec(family="backend", problem_description="Sum a list.",
                       ground_truth="def f(x):\n    return sum(x)\n")
    with pytest.raises(EngineError, match="is not a backend-lite task"):
        engine("expert", [builtin]).generate([[SYSTEM, {"role": "user", "content": "Sum a list."}]], SamplingParams())


def test_unknown_task_is_one_line():
    specs = chosen_specs()
    with pytest.raises(EngineError) as caught:
        engine("expert", specs).generate([[SYSTEM, {"role": "user", "content": "Write me a\nsorting function."}]],
                                         SamplingParams())
    message = str(caught.value)
    assert "not the description of a backend-lite task" in message and "\n" not in message


def test_cli_rollout_on_a_task_that_is_not_lite_is_one_line(tmp_path):
    env = dict(os.environ, COLBENCH_DB=f"sqlite:///{tmp_path / 'c.db'}", NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    result = subprocess.run(
        COLBENCH + ["rollout", "--engine", "scripted:expert", "--tasks", "backend:test", "--limit", "1", "--sandbox",
                    "bwrap"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert "not the description of a backend-lite task" in lines[0] and "Traceback" not in result.stderr


def test_cli_expert_rollout_on_lite_tasks(tmp_path):
    env = dict(os.environ, COLBENCH_DB=f"sqlite:///{tmp_path / 'c.db'}", NO_COLOR="1")
    result = subprocess.run(
        COLBENCH + ["rollout", "--engine", "scripted:expert", "--tasks", "backend-lite:train", "--limit", "5",
                    "--sandbox", "bwrap", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["policy"] == "scripted:expert" and summary["engine"] == "scripted"
    assert summary["graded"] == 5 and summary["success_rate"] == 1.0


def test_cli_offset_and_limit_pick_disjoint_tasks_and_too_far_is_one_line(tmp_path):
    """Demonstrations on --offset N and a validation rollout on --limit N never share a task."""
    from colbench.store.db import Database
    from colbench.store.models import Trajectory
    from sqlmodel import select

    url = f"sqlite:///{tmp_path / 'c.db'}"
    env = dict(os.environ, COLBENCH_DB=url, NO_COLOR="1")
    env.pop("COLBENCH_DEBUG", None)
    base = COLBENCH + ["rollout", "--engine", "scripted:expert", "--tasks", "backend-lite:train", "--sandbox", "bwrap"]
    for extra in (["--offset", "3", "--limit", "2"], ["--limit", "3"]):
        result = subprocess.run(base + extra, capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
    with Database(url).read() as session:
        tasks = [t.task_id for t in session.exec(select(Trajectory).order_by(Trajectory.id)).all()]
    assert len(tasks) == len(set(tasks)) == 5
    assert sorted(tasks[:2]) == sorted(tasks)[3:]  # the offset run took the split's 4th and 5th tasks
    result = subprocess.run(base + ["--offset", "840"], capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert result.returncode != 0 and len(lines) == 1 and "--offset 840 skips every" in lines[0], result.stderr
