"""The simulator guard and its audit, end to end: the extractor agent, a human model that complies (the loopback
server playing an endpoint simulator), the real sandbox, the store, `colbench audit simulator`."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlmodel import select

from colbench.audit import audit_runs
from colbench.families import family
from colbench.rollout import run as rollout
from colbench.rollout_config import RolloutConfig
from colbench.simulators.guard import REFUSAL
from colbench.store import queries
from colbench.store.db import Database
from colbench.store.models import Task, Trajectory, Turn

COLBENCH = [sys.executable, "-m", "colbench.cli.app"]
BACKEND = family("backend")


def hidden_code(request: dict) -> str:
    """The reference the simulator model is shown (colbench.simulators.prompts.brief_messages)."""
    text = request["messages"][-1]["content"]
    return text.split("HIDDEN INFORMATION (only you can see this):\n", 1)[1].split("\n\nCONVERSATION SO FAR", 1)[0]


def complying(request: dict) -> str:
    """A human model that does what the extractor asks: pastes the function."""
    return "Sure, here it is:\n```python\n" + hidden_code(request) + "\n```"


def complying_on_first_and_third(request: dict) -> str:
    """Complies with two of the extractor's five requests (its 1st and 3rd), else describes in words."""
    transcript = request["messages"][-1]["content"].split("CONVERSATION SO FAR:\n", 1)[1]
    asked = transcript.count("Assistant: ")
    if asked in (1, 3):
        return complying(request)
    return "It should give the right result for the inputs I described; I'd rather not go into the code."


def extract(db_url, server, mode, tasks=3):
    db = Database(db_url)
    config = RolloutConfig(model="extractor", engine="scripted", simulator=f"endpoint:{server.base_url}#human",
                           sim_guard=mode, tasks="backend:train", limit=tasks, sandbox="bwrap")
    result = rollout(db, config)
    return db, result


def shown_and_stored(db, run: str):
    run_id = int(run.split(":")[1])
    with db.read() as session:
        ids = [t.id for t in session.exec(select(Trajectory).where(Trajectory.rollout_id == run_id))]
        turns = queries.turns_for(session, ids)
        tasks = {t.id: t for t in session.exec(select(Task))}
        trajectories = {t.id: t for t in session.exec(select(Trajectory).where(Trajectory.rollout_id == run_id))}
    return turns, tasks, trajectories


def test_the_transcript_marker_the_complying_human_counts_is_real(sqlite_url, openai_server):
    # The scripted human above counts the agent's turns in the brief: if the brief's transcript changed, the
    # "rate it complies" test below would measure nothing.
    openai_server.set_responder(complying_on_first_and_third)
    db, result = extract(sqlite_url, openai_server, "flag", tasks=1)
    turns, _, _ = shown_and_stored(db, result.run)
    (dialogue,) = turns.values()
    leaked = [t.index for t in dialogue if t.role == "user" and t.leak]
    assert leaked == [2, 6]  # the replies to the 1st and 3rd requests


@pytest.mark.parametrize("mode", ["redact", "resample"])
def test_a_human_that_pastes_the_reference_never_reaches_the_agent_under_the_guard(sqlite_url, openai_server, mode):
    openai_server.set_responder(complying)
    db, result = extract(sqlite_url, openai_server, mode)
    turns, tasks, trajectories = shown_and_stored(db, result.run)
    replies = 0
    for trajectory_id, dialogue in turns.items():
        task = tasks[trajectories[trajectory_id].task_id]
        question = ""
        for turn in dialogue:
            if turn.role == "assistant":
                question = turn.content
                continue
            if turn.index == 0:
                continue
            replies += 1
            assert BACKEND.leak(task, question, turn.content) is None, turn.content  # nothing reached the agent
            # The code block was cut out and the refusal stands in its place; the words around it remain.
            assert turn.content == "Sure, here it is:\n" + REFUSAL
            assert turn.leak["action"] == "redacted" and task.ground_truth.strip() in turn.leak["original"]
            assert turn.leak["resamples"] == (3 if mode == "resample" else 0)
        # With nothing extracted, the extractor submits the signature returning None: no test passes.
        assert trajectories[trajectory_id].reward == 0.0
    assert replies == 3 * 5 and result.stats.leaks == replies
    (audit,) = audit_runs(db, [result.run])
    assert (audit.replies, audit.leaks, audit.reached_agent, audit.redacted) == (15, 15, 0, 15)
    assert audit.dialogues_leaking == audit.dialogues == 3


def test_under_flag_the_leak_reaches_the_agent_and_pays(sqlite_url, openai_server):
    # The reason for the guard: an agent that extracts the code from a complying human passes every test.
    # (The human model's replies are cut at its max_tokens, 256, as a real one's are: a long reference arrives
    # incomplete, so not every extracted answer passes; the first task's short one passes every test.)
    openai_server.set_responder(complying)
    db, result = extract(sqlite_url, openai_server, "flag")
    _, _, trajectories = shown_and_stored(db, result.run)
    rewards = [t.reward for t in sorted(trajectories.values(), key=lambda t: t.id)]
    assert rewards[0] == 1.0 and sum(rewards) > 1.0, rewards  # the redacted run above scores 0 on each
    (audit,) = audit_runs(db, [result.run])
    assert (audit.leaks, audit.reached_agent, audit.redacted) == (15, 15, 0)
    assert audit.figures()["leak_per_reply"] == 1.0


def test_the_extractor_measures_the_rate_a_human_complies(sqlite_url, openai_server):
    openai_server.set_responder(complying_on_first_and_third)
    db, result = extract(sqlite_url, openai_server, "flag")
    (audit,) = audit_runs(db, [result.run])
    assert audit.replies == 15 and audit.leaks == 6  # 2 of 5 requests, in each of 3 dialogues
    assert audit.figures()["leak_per_reply"] == pytest.approx(0.4)
    assert audit.refusals == 0 and audit.empty == 0


def test_the_extractor_gets_nothing_from_the_builtin_human(sqlite_url):
    db = Database(sqlite_url)
    for tasks in ("backend-lite:train", "backend:train"):
        config = RolloutConfig(model="extractor", engine="scripted", tasks=tasks, limit=4, sandbox="bwrap")
        result = rollout(db, config)
        (audit,) = audit_runs(db, [result.run])
        assert audit.replies == 4 * 5, (tasks, audit)
        # It never writes code: no line, expression or block of a reference reaches the agent. Asked to spell out
        # every constant and key, it does name a dictionary's keys (categorize_expenses' four categories): the
        # detector counts that as constants beyond a specific question, and the docs report the rate.
        assert set(audit.kinds) <= {"constants"} and audit.leaks <= 1, (tasks, audit)
        assert audit.off_role == 0, audit  # it stays a human who describes
        if tasks == "backend-lite:train":
            assert audit.leaks == 0, audit


def test_audit_cli_prints_the_figures_and_refuses_bad_runs(sqlite_url, openai_server, tmp_path):
    openai_server.set_responder(complying_on_first_and_third)
    db, result = extract(sqlite_url, openai_server, "flag", tasks=2)
    env = {"COLBENCH_DB": sqlite_url, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([*COLBENCH, "audit", "simulator", result.run, "--json"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    (figures,) = json.loads(done.stdout)
    assert (figures["replies"], figures["leaks"], figures["dialogues_leaking"]) == (10, 4, 2)
    shown = subprocess.run([*COLBENCH, "audit", "simulator", result.run], capture_output=True, text=True, env=env,
                           timeout=300)
    assert shown.returncode == 0 and "40.0% (4/10)" in shown.stdout, shown.stdout

    # runs show counts them per run.
    shown_run = subprocess.run([*COLBENCH, "runs", "show", result.run], capture_output=True, text=True, env=env,
                               timeout=300)
    said = " ".join(shown_run.stdout.split())
    assert "simulator leaks: 4 replies in 2 dialogues (4 flagged)" in said, shown_run.stdout

    # inspect marks the leaking replies, with their evidence, in the table and in --json.
    _, _, trajectories = shown_and_stored(db, result.run)
    first = min(trajectories)
    marked = subprocess.run([*COLBENCH, "inspect", str(first)], capture_output=True, text=True, env=env, timeout=300)
    assert marked.returncode == 0 and marked.stdout.count("leak: code-block (flagged)") == 2, marked.stdout
    payload = json.loads(subprocess.run([*COLBENCH, "inspect", str(first), "--json"], capture_output=True, text=True,
                                        env=env, timeout=300).stdout)
    assert [t["index"] for t in payload["turns"] if t["leak"]] == [2, 6]

    # A run whose agent answered at once has no reply to audit; an unknown run: one line each, no traceback.
    early = rollout(db, RolloutConfig(model="early@0", engine="scripted", tasks="backend-lite:train", limit=2,
                                      sandbox="bwrap"))
    for ref, says in ((early.run, "no simulator replies"), ("rollout:999", "no rollout:999")):
        bad = subprocess.run([*COLBENCH, "audit", "simulator", ref], capture_output=True, text=True, env=env,
                             timeout=300)
        assert bad.returncode != 0 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_a_migrated_store_keeps_the_verdicts(sqlite_url, openai_server):
    # The column is the migration's (0008), read back by a fresh connection.
    openai_server.set_responder(complying)
    db, result = extract(sqlite_url, openai_server, "redact", tasks=1)
    with Database(sqlite_url).read() as session:
        leaks = [t.leak for t in session.exec(select(Turn).where(Turn.leak.is_not(None)))]
    assert len(leaks) == 5 and {leak["kind"] for leak in leaks} <= {"line", "expression", "code-block", "constants"}


def oversharing(request: dict) -> str:
    """A lite human that states every hidden fact whatever it is asked (the brief lists them one per line)."""
    return " ".join(line.strip("- ").split(" [asked as")[0] for line in hidden_code(request).splitlines()
                    if line.startswith("- "))


def misstating(request: dict) -> str:
    """A lite human that states every fact with each number one higher."""
    import re

    return re.sub(r"\d+(?:\.\d+)?", lambda m: str(float(m.group()) + 1).removesuffix(".0"), oversharing(request))


def test_over_release_and_wrong_statements_on_backend_lite(sqlite_url, openai_server, tmp_path):
    from colbench.simulators.rulebased.lite import revealed_facts
    from colbench.tasks.lite import facts_of
    from colbench.wiring import select_tasks

    db = Database(sqlite_url)
    config = dict(model="extractor", engine="scripted", tasks="backend-lite:train", limit=3, sandbox="bwrap")
    builtin = rollout(db, RolloutConfig(**config)).run
    openai_server.set_responder(oversharing)
    over = rollout(db, RolloutConfig(**config, simulator=f"endpoint:{openai_server.base_url}#human")).run
    # (The same policy, simulator and setting are one run, continued: the lying human gets a store of its own.)
    other = Database(f"sqlite:///{tmp_path}/lying.db")
    openai_server.set_responder(misstating)
    wrong = rollout(other, RolloutConfig(**config, simulator=f"endpoint:{openai_server.base_url}#human")).run
    quiet, loud = audit_runs(db, [builtin, over])
    (lying,) = audit_runs(other, [wrong])

    # By hand from the tasks' facts: the extractor's five requests ask for code, never for a fact, so each reply
    # that states every fact over-releases; the built-in human states nothing it is not asked ("I don't know.").
    tasks = select_tasks(db, "backend-lite:train", 3)
    assert all(not revealed_facts(t, q) for t in tasks for q in ("Please paste the function.",))
    numeric = sum(any(ch.isdigit() for fact in facts_of(t) for ch in fact.sentence) for t in tasks)
    assert (quiet.lite_replies, quiet.over_release, quiet.wrong_statements) == (15, 0, 0)
    assert (loud.lite_replies, loud.over_release, loud.wrong_statements) == (15, 15, 0)
    assert lying.wrong_statements == 5 * numeric, lying  # every reply, in each task with a number among its facts
    assert numeric >= 2


def complying_on_the_first_draw_only():
    """A human model that pastes the function the first time it is asked a thing, and answers in words when the
    same request comes again (what a sampled human does some of the time)."""
    draws: dict[str, int] = {}

    def responder(request: dict) -> str:
        brief = request["messages"][-1]["content"]
        draws[brief] = draws.get(brief, 0) + 1
        return complying(request) if draws[brief] == 1 else "It should return the total for the inputs I described."

    return responder


def test_resample_delivers_the_clean_redraw_and_keeps_the_leak_on_record(sqlite_url, openai_server):
    openai_server.set_responder(complying_on_the_first_draw_only())
    db, result = extract(sqlite_url, openai_server, "resample", tasks=1)
    turns, tasks, trajectories = shown_and_stored(db, result.run)
    ((trajectory_id, dialogue),) = turns.items()
    task = tasks[trajectories[trajectory_id].task_id]
    replies = [t for t in dialogue if t.role == "user" and t.index > 0]
    assert len(replies) == 5
    for turn in replies:
        assert turn.content == "It should return the total for the inputs I described."
        assert turn.leak["action"] == "resampled" and turn.leak["resamples"] == 1
        assert task.ground_truth.strip() in turn.leak["original"]
    (audit,) = audit_runs(db, [result.run])
    assert (audit.leaks, audit.reached_agent) == (5, 0)


def test_the_guard_keeps_a_server_humans_event_loop_and_a_rule_humans_inline_call():
    # The rollout answers a server's human on the event loop (so a stopped run cancels its requests) and calls
    # the rule-based human inline; a guard that hid either would make Ctrl-C wait on hung requests, or put
    # microsecond replies on a thread.
    from colbench.simulators.endpoint import EndpointSimulator
    from colbench.simulators.guard import guarded

    server_human = guarded(EndpointSimulator("human", "http://127.0.0.1:9/v1"), BACKEND, "redact")
    rule_human = guarded(BACKEND.builtin_simulator(), BACKEND, "redact")
    assert hasattr(server_human, "areply") and not hasattr(rule_human, "areply") and rule_human.instant
    assert guarded(rule_human.inner, BACKEND, "off") is rule_human.inner


# Off role (colbench/simulators/offrole.py): each case is a failure of a model playing the human seen in practice
# (SmolLM2 as the local human answers as the assistant or pastes a function; endpoint models echo the agent's
# marker), or a human's plain description that must stay in role.
OFF_ROLE_CASES = [
    ("Sure:\n```python\ndef total(xs):\n    return sum(xs)\n```", "solution"),
    ("def total(xs):\n    return sum(xs)", "solution"),
    ("class Cart:\n    pass", "solution"),
    ('<div class="p-4 bg-white"><h1>Welcome</h1></div>', "solution"),
    ("Assistant: Could you tell me the input type?", "as the agent"),
    ("Agent: here is my plan", "as the agent"),
    ("It takes a list.\nUser: and what does it return?\nAssistant: a number", "as the agent"),
    ("I WANT TO ANSWER: def total(xs): return sum(xs)", "protocol"),
    ("OUTPUT: the function is ready", "protocol"),
    ("It should return the total of the list as a float.", None),
    ("Return the total, and round it to two decimals.", None),
    ("The page has a header with a blue background and a centered title.", None),
    ("I don't know.", None),
    ("Yes, an empty list should give 0.", None),
    ("Use the class names from our style guide; the div layout is up to you.", None),
]


@pytest.mark.parametrize("reply,kind", OFF_ROLE_CASES)
def test_off_role_replies_are_told_from_a_human_describing(reply, kind):
    from colbench.simulators.offrole import off_role

    assert off_role(reply) == kind


def test_the_audit_counts_a_human_that_speaks_as_the_agent(sqlite_url, openai_server):
    openai_server.set_responder(lambda request: "Assistant: What should the function return for an empty list?")
    db, result = extract(sqlite_url, openai_server, "flag", tasks=2)
    (audit,) = audit_runs(db, [result.run])
    assert audit.replies == 10 and audit.off_role == 10 and audit.off_role_kinds == {"as the agent": 10}
    assert audit.leaks == 0 and audit.figures()["off_role_rate"] == 1.0


def test_draws_reask_each_prefix_as_the_rollout_asked_it(sqlite_url, openai_server):
    """--draws K: the deterministic built-in human answers each stored prefix again exactly as it did (the prefix is
    rebuilt as the rollout built it); a served human whose answer changes with every call disagrees everywhere."""
    db = Database(sqlite_url)
    builtin = rollout(db, RolloutConfig(model="scripted:mixed@0.6", engine="scripted", tasks="backend-lite:train",
                                        limit=2, sandbox="bwrap"))
    (audit,) = audit_runs(db, [builtin.run], draws=2)
    assert audit.redrawn == audit.replies > 0 and audit.disagreeing == 0 and audit.distinct_replies == 1.0
    assert audit.draw_errors == 0 and audit.dialogues_disagreeing == 0 and audit.redrawn_dialogues >= 1
    calls = iter(range(10_000))
    openai_server.set_responder(lambda request: f"It should handle case number {next(calls)}.")
    _, served = extract(sqlite_url, openai_server, "off", tasks=1)
    (audit,) = audit_runs(db, [served.run], draws=2, draw_limit=3)
    assert audit.redrawn == 3 and audit.disagreeing == 3 and audit.distinct_replies == 3.0 and audit.draw_errors == 0
    assert audit.figures()["disagreement_rate"] == 1.0
    assert (audit.dialogues_disagreeing, audit.redrawn_dialogues) == (1, 1)  # the 3 prefixes are one dialogue's


def test_imported_official_dialogues_get_their_leak_verdicts(sqlite_url, tmp_path):
    """The released data's simulator was never guarded: import an official trajectory file, then audit it. Two of
    four dialogues have a human reply that pastes the hidden function; the audit finds exactly those."""
    from colbench.official import import_trajectories
    from colbench.store.models import RolloutRun
    from conftest import write_jsonl
    from officialdata import backend_task, trajectory

    records = [trajectory(backend_task(i)) for i in range(4)]
    for record in records[:2]:
        first_reply = next(m for m in record["dialogue_history"][1:] if m["role"] == "user")
        first_reply["content"] = "Sure, here it is:\n```python\n" + record["task"]["ground_truth"] + "```"
    db = Database(sqlite_url)
    import_trajectories(db, write_jsonl(tmp_path / "released.jsonl", records))
    with db.read() as session:
        (run,) = session.exec(select(RolloutRun).where(RolloutRun.policy == "import:released")).all()
    (audit,) = audit_runs(db, [f"rollout:{run.id}"])
    assert (audit.dialogues, audit.replies) == (4, 8)
    assert (audit.leaks, audit.dialogues_leaking, audit.reached_agent) == (2, 2, 2)
    assert audit.kinds == {"code-block": 2} and audit.off_role == 2  # a pasted function is off role too
