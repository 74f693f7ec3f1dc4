"""The registries of engines, simulators and sandboxes (colbench/registry.py): the CLI's
choices and errors come from them, a newly registered one is offered and built with no
other change, and every registered engine and simulator meets its contract here (the
sandboxes' is the attack suite, parametrised over their registry: plugins/sandboxes.py)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from colbench import families, protocol
from colbench.engines import ENGINES, EngineError, make_engine
from colbench.engines.base import Engine, Generation, Sample, SamplingParams
from colbench.grading.sandboxes import CHOICES, SANDBOXES, resolve
from colbench.registry import Registry
from colbench.rollout_config import RolloutConfig
from colbench.simulators import SIMULATORS, make_simulator
from colbench.simulators.prompts import build_messages
from colbench.simulators.base import SimReply, SimRequest, Simulator
from colbench.tasks.spec import TaskSpec

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the registry itself


def registry() -> Registry:
    kinds = Registry("gadget", error=LookupError, traits={"colour": "grey"})
    kinds.register("plain", "no argument", colour="red")(lambda argument: ("plain", argument))
    kinds.register("named", "takes a name", argument="<name>", aliases=("alias",))(lambda argument: ("named", argument))
    kinds.register("needs", "must have one", argument="<x>", argument_required=True)(
        lambda argument: ("needs", argument)
    )
    kinds.register("old", "an older name", hidden=True)(lambda argument: ("old", argument))
    return kinds


def test_a_spec_names_a_choice_and_its_argument():
    kinds = registry()
    assert kinds.parse("plain") == (kinds.get("plain"), "")
    assert kinds.parse(" Named:Bob ")[1] == "Bob"  # the name is case-blind, the argument kept as written
    assert kinds.get("alias:x").name == "named"
    assert kinds.get("old").name == "old"  # hidden: still understood
    assert kinds.get("plain").colour == "red" and kinds.get("named").colour == "grey"  # given, or the kind's default
    assert (
        "needs:1" in kinds
        and "needs" not in kinds
        and "named" in kinds
        and "plain:1" not in kinds
        and "nope" not in kinds
    )


def test_choices_help_and_errors_are_the_registrations():
    kinds = registry()
    assert kinds.names() == ("plain", "named", "needs")  # hidden ones are not offered
    assert kinds.spellings() == "plain, named:<name>, needs:<x>"
    assert kinds.help() == "plain (no argument), named:<name> (takes a name), needs:<x> (must have one)"
    with pytest.raises(LookupError, match=r"^unknown gadget 'nope': choose one of plain, named:<name>, needs:<x>$"):
        kinds.parse("nope")
    with pytest.raises(LookupError, match=r"^bad gadget 'plain:1': write it plain$"):
        kinds.parse("plain:1")
    with pytest.raises(LookupError, match=r"^bad gadget 'needs': write it needs:<x>$"):
        kinds.parse("needs")
    with pytest.raises(ValueError, match="registered twice"):
        kinds.register("alias", "again")(lambda argument: None)
    with pytest.raises(
        ValueError, match=r"unknown traits \['color'\]"
    ):  # a misspelt trait is caught where it is registered
        kinds.register("other", "misspelt", color="blue")


def test_the_cli_offers_and_refuses_what_is_registered():
    with pytest.raises(ValueError) as err:
        RolloutConfig(engine="llamacpp")
    assert all(name in str(err.value) for name in ENGINES.names()) and "\n" not in str(err.value)
    with pytest.raises(ValueError) as err:
        RolloutConfig(sandbox="chroot")
    assert all(name in str(err.value) for name in CHOICES)
    shown = subprocess.run([sys.executable, "-m", "colbench.cli.app", "rollout", "--help"], capture_output=True,
                           text=True,
                           env={**os.environ, "COLUMNS": "400"}, timeout=120)
    for kinds in (ENGINES, SIMULATORS, SANDBOXES):
        for choice in kinds:
            assert choice.spelling in shown.stdout, choice.name
    for choice in SANDBOXES:
        assert choice.name in CHOICES


@pytest.fixture
def echo_engine(monkeypatch):
    """An engine registered the way a new one would be, in a copy of the registry."""

    class Echo(Engine):
        kind = "echo"

        def __init__(self, model, **options):
            self.model_ref, self.options = f"echo:{model}", options

        def generate(self, conversations, params):
            return [Generation(c[-1]["content"], 1, [Sample(c[-1]["content"])] * params.n, 0.0) for c in conversations]

    monkeypatch.setattr(ENGINES, "_choices", dict(ENGINES._choices))
    ENGINES.register("echo", "says it back", local=False)(lambda model, **options: Echo(model, **options))
    return Echo


def test_a_new_engine_is_its_registration(echo_engine, tmp_path):
    from colbench.store.db import Database
    from colbench.wiring import build_engine

    assert RolloutConfig(engine="echo").engine == "echo"
    engine = build_engine(Database(f"sqlite:///{tmp_path / 'c.db'}"), "echo", "parrot", device="cpu")
    assert isinstance(engine, echo_engine) and engine.model_ref == "echo:parrot" and engine.options == {"device": "cpu"}
    with pytest.raises(EngineError, match="choose one of .*echo"):
        make_engine("ekko", "parrot")


def test_a_new_sandbox_joins_the_attack_suite(tmp_path):
    """A plugin that registers a sandbox before the tests are collected: the grading and attack
    tests are collected for it too (and skip here, since its check() says it cannot run)."""
    (tmp_path / "fake_sandbox.py").write_text(
        "from colbench.grading.sandboxes import SANDBOXES\n"
        "class Fake:\n"
        "    name = 'fake'\n"
        "    check = staticmethod(lambda: 'not on this machine')\n"
        "SANDBOXES.register('fake', 'a test double', confines=True)(Fake)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    found = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_sandbox", "--collect-only", "-q", "-p",
                            "no:cacheprovider",
                            "tests/test_sandbox_attacks.py", "tests/test_grading_differential.py"],
                           cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    ids = found.stdout.splitlines()
    assert found.returncode == 0, found.stdout[-2000:] + found.stderr[-2000:]
    for name in ("fake", *(c.name for c in SANDBOXES if c.confines)):
        assert any(f"[{name}" in line or f"-{name}]" in line for line in ids if "test_sandbox_attacks.py" in line), name
    assert not any("[none" in line or "-none]" in line for line in ids)  # not a sandbox: not attacked


def test_auto_takes_the_first_usable_confining_sandbox(monkeypatch):
    from colbench.grading.sandboxes import SandboxUnavailable

    for choice in SANDBOXES:
        monkeypatch.setattr(choice.factory, "check", staticmethod(lambda: "not here"))
    with pytest.raises(SandboxUnavailable) as err:
        resolve("auto")
    assert all(f"{c.name}: not here" in str(err.value) for c in SANDBOXES if c.confines) and "\n" not in str(err.value)
    first = next(c for c in SANDBOXES if c.confines)
    monkeypatch.setattr(first.factory, "check", staticmethod(lambda: None))
    monkeypatch.setattr(first.factory, "__init__", lambda self: None)
    assert isinstance(resolve("auto"), first.factory)


# ---------------------------------------------------------------- the engine contract

CONVERSATIONS = [[{"role": "user", "content": "Hi"}],
                 [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Add two numbers."}]]


def lite_conversation() -> tuple[list, TaskSpec]:
    """A backend-lite task's opening: what a scripted agent can answer."""
    from colbench.families.backend import BACKEND_SYSTEM_PROMPT
    from colbench.tasks import lite

    spec = next(task for task in lite.lite_tasks() if task.split == "train")
    system = {"role": "system", "content": BACKEND_SYSTEM_PROMPT.format(turns=protocol.MAX_AGENT_TURNS)}
    return [system, {"role": "user", "content": spec.problem_description}], spec


def build_hf(request, tmp_path):
    return (
        make_engine("hf", str(request.getfixturevalue("tiny_model_dir")), device="cpu", max_batch_size=2),
        CONVERSATIONS
    )


def build_ct2(request, tmp_path):
    pytest.importorskip("ctranslate2")
    return make_engine("ct2", str(request.getfixturevalue("tiny_model_dir")), cache_dir=tmp_path), CONVERSATIONS


def build_vllm(request, tmp_path):
    import torch

    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip("vllm needs the vllm package and a GPU")
    return make_engine("vllm", str(request.getfixturevalue("tiny_model_dir"))), CONVERSATIONS


def build_vllm_serve(request, tmp_path):
    python = request.getfixturevalue("vllm_install").python  # skips where no vLLM runs (fails under CI)
    folder = str(request.getfixturevalue("servable_tiny_dir"))
    return make_engine("vllm-serve", folder, vllm_python=python), CONVERSATIONS


def build_openai(request, tmp_path):
    return (
        make_engine("openai", "test-model", base_url=request.getfixturevalue("openai_server").base_url),
        CONVERSATIONS
    )


def build_scripted(request, tmp_path):
    conversation, spec = lite_conversation()
    return make_engine("scripted:expert", "", tasks=[spec], tokenizer=None), [conversation, conversation]


def build_plugin(name: str):
    """A plugin's engine (one the test plugin packages register) that loads no model: built from its name alone."""
    return lambda request, tmp_path: (make_engine(name, ""), CONVERSATIONS)


# How to build each registered engine here; a newly registered engine of colbench's fails the contract
# until it has an entry (a contract that skipped it would pass without checking anything).
BUILDS = {"hf": build_hf, "ct2": build_ct2, "vllm": build_vllm, "vllm-serve": build_vllm_serve, "openai": build_openai,
          "scripted": build_scripted}
PLUGIN_ENGINES = {"secret-guesser", "arith-solver"}  # tests/plugin_package's, installed by conftest.py


@pytest.mark.parametrize("name", ENGINES.names())
def test_every_engine_meets_the_contract(name, request, tmp_path):
    assert name in BUILDS or name in PLUGIN_ENGINES, f"add a way to build the {name} engine here to BUILDS"
    engine, conversations = BUILDS.get(name, build_plugin(name))(request, tmp_path)
    with engine:
        assert isinstance(engine, Engine) and name in (engine.kind, engine.kind.split("-")[0])
        assert isinstance(engine.model_ref, str) and engine.model_ref and "\n" not in engine.model_ref
        gens = engine.generate(conversations, SamplingParams(temperature=1.0, max_new_tokens=6, n=2, seed=1))
        assert len(gens) == len(conversations)
        for gen in gens:
            assert isinstance(gen, Generation) and isinstance(gen.prompt_text, str) and gen.prompt_text
            assert len(gen.samples) == 2
            for sample in gen.samples:
                assert isinstance(sample.text, str) and sample.finish_reason in ("stop", "length")
                if sample.token_logprobs:  # an engine that reports them reports one per sampled token, each <= 0
                    assert len(sample.token_logprobs) == sample.num_tokens and all(
                        lp <= 1e-6 for lp in sample.token_logprobs
                    )
                if name != "scripted":  # a scripted answer is written, not sampled: no token budget
                    assert sample.num_tokens <= 6


# ---------------------------------------------------------------- the simulator contract

BACKEND_TASK = TaskSpec("backend", "Write f. The signature of the function is: def f(x)", "def f(x):\n    return x + 1",
                        hidden_information="f adds one to x.")
FRONTEND_TASK = TaskSpec("frontend", "Make my page.", "<html><body><h1>Hi</h1></body></html>")
DIALOGUE = [{"role": "user", "content": "Write f for me."}, {"role": "assistant", "content": "What should f return?"}]


def served(request) -> str:
    return request.getfixturevalue("openai_server").base_url


def local_engine(request):
    from colbench.engines.openai import OpenAIEngine

    base_url = served(request)
    return lambda ref: OpenAIEngine(ref, base_url)


# How to build each registered simulator here (spec, family, engine factory); as for engines,
# a newly registered one fails until it has an entry.
SPECS = {
    "builtin": lambda request: ("builtin", "backend", None),
    "builtin-frontend": lambda request: ("builtin-frontend", "frontend", None),
    "endpoint": lambda request: (f"endpoint:{served(request)}#test-model", "backend", None),
    "local": lambda request: ("local:test-model", "backend", local_engine(request)),
    "vision": lambda request: (f"vision:{served(request)}#test-model", "frontend", None),
}


@pytest.mark.parametrize("name", [c.name for c in SIMULATORS._choices.values()])  # hidden ones too: still built
def test_every_simulator_meets_the_contract(name, request):
    assert name in SPECS, f"add a way to build the {name} simulator here to SPECS"
    spec, family, engine_factory = SPECS[name](request)
    simulator = make_simulator(spec, engine_factory=engine_factory, builtin=families.family(family).builtin_simulator)
    try:
        assert isinstance(simulator, Simulator)
        assert simulator.ref.split(":")[0] == name and "\n" not in simulator.ref
        task = BACKEND_TASK if family == "backend" else FRONTEND_TASK
        # One reply per request, in order, and never an exception: a request it cannot serve is an error reply.
        # As the family's environment makes them: what the human sees, and what a model playing it is told.
        env_request = {"backend": dict(brief=build_messages), "frontend": dict(medium="pages")}[family]
        replies = simulator.reply([SimRequest(task, DIALOGUE, **env_request), SimRequest(task, DIALOGUE[:1])])
        assert len(replies) == 2
        for reply in replies:
            assert isinstance(reply, SimReply) and isinstance(reply.text, str)
            assert (reply.error is None) or (isinstance(reply.error, str) and reply.text == "")
    finally:
        simulator.close()
