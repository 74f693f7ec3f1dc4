"""Simulated humans: the endpoint and local-model simulators against the loopback
OpenAI-compatible server, and the deterministic built-in simulator on realistic
reference functions."""
from __future__ import annotations

import re

import pytest

from colbench.engines.openai import OpenAIEngine
from colbench.simulators import make_simulator
from colbench.simulators.base import SimRequest
from colbench.simulators.rulebased.backend import DONT_KNOW, FRONTEND_REPLY, NOTHING_MORE, BuiltinSimulator
from colbench.simulators.endpoint import EndpointSimulator
from colbench.simulators.local import LocalModelSimulator
from colbench.simulators.prompts import build_messages
from colbench.tasks.spec import TaskSpec

# ---------------------------------------------------------------------------------------
# Reference functions, in the style of ColBench's backend tasks
# ---------------------------------------------------------------------------------------

SHIPPING = '''
def shipping_cost(weight_kg, destination, express=False):
    if weight_kg <= 0:
        raise ValueError("weight must be positive")
    if destination == "domestic":
        base = 5.0
    elif destination == "europe":
        base = 15.0
    else:
        base = 25.0
    if weight_kg > 20:
        base += weight_kg * 1.5
    elif weight_kg > 5:
        base += weight_kg * 0.75
    if express:
        base *= 2
    return round(base, 2)
'''

GRADES = '''
def summarize_grades(students, pass_mark=60):
    """Summarise a class's exam results."""
    if not students:
        return {"average": 0, "top": None, "passed": []}
    total = 0
    passed = []
    for student in students:
        total += student["score"]
        if student["score"] >= pass_mark:
            passed.append(student["name"])
    best = max(students, key=lambda s: s["score"])
    return {"average": round(total / len(students), 1), "top": best["name"], "passed": sorted(passed)}
'''

PASSWORD = '''
SPECIAL = "!@#$%^&*"

def password_strength(password):
    if len(password) < 8:
        return "weak"
    has_digit = any(c.isdigit() for c in password)
    has_special = any(c in SPECIAL for c in password)
    has_upper = any(c.isupper() for c in password)
    score = sum([has_digit, has_special, has_upper])
    if score == 3 and len(password) >= 12:
        return "strong"
    if score >= 2:
        return "medium"
    return "weak"
'''

BMI = '''
import math

def bmi_report(weight, height_cm):
    height_m = height_cm / 100
    bmi = weight / height_m ** 2
    if bmi < 18.5:
        category = "underweight"
    elif bmi < 25:
        category = "normal"
    elif bmi < 30:
        category = "overweight"
    else:
        category = "obese"
    return round(bmi, 1), category
'''

TAX = '''
TAX_RATES = {"CA": 0.0725, "NY": 0.04, "TX": 0.0625}

def invoice_total(items, state="CA"):
    subtotal = sum(item["price"] * item["qty"] for item in items)
    tax = subtotal * TAX_RATES.get(state, 0.05)
    return f"Total: ${subtotal + tax:.2f}"
'''

ODD = '''
class Counter:
    def __init__(self, start=0):
        self.value = start

def tally(words, ignore_case=True):
    counts = {}
    for w in words:
        key = w.lower() if ignore_case else w
        try:
            counts[key] = counts.get(key, 0) + 1
        except TypeError:
            continue
    while len(counts) > 100:
        counts.popitem()
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
'''

REFERENCES = {"shipping": SHIPPING, "grades": GRADES, "password": PASSWORD, "bmi": BMI, "tax": TAX, "odd": ODD}

QUESTIONS = [
    "What should the function return?",
    "Are there any thresholds I should know about?",
    "Should the result be rounded? To how many decimals?",
    "What keys should the returned dictionary have?",
    "What should happen if the input is empty or invalid?",
    "Is there a default value for any parameter?",
    "What does each parameter mean and what type is it?",
    "1. How is the total computed? 2. What about tax?",
    "What color should the header be?",
    "Any other details I should know?",
    "Here is my plan: def f(x): return x * 2. Is that right?",
]


def task(code: str, signature: str = "f(x)", family: str = "backend") -> TaskSpec:
    return TaskSpec(family=family,
                    problem_description=f"Write a function. The signature of the function is: def {signature}",
                    ground_truth=code)


def ask(sim, spec: TaskSpec, question: str, history: list[dict] | None = None) -> str:
    dialogue = [{"role": "user", "content": spec.problem_description}, *(history or []),
                {"role": "assistant", "content": question}]
    [reply] = sim.reply([SimRequest(spec, dialogue)])
    assert reply.error is None
    return reply.text


CODE_PATTERNS = [
    (re.compile(r"\bdef\s"), "def"), (re.compile(r"\breturn\s", re.I), "return"), (re.compile("```"), "fence"),
    (re.compile(r"\blambda\b"), "lambda"), (re.compile(r"[=!<>+\-*/]="), "operator"),
    (re.compile(r"\b\w+\s*=\s*\S"), "assignment"), (re.compile(r"[A-Za-z_]\("), "call"),
    (re.compile(r"\w\["), "subscript"), (re.compile(r"\b[a-z_]\w*\.[a-z_]\w*\("), "method"),
]


def assert_no_code(text: str) -> None:
    for pattern, what in CODE_PATTERNS:
        assert not pattern.search(text), f"{what} in reply: {text!r}"


# ---------------------------------------------------------------------------------------
# Built-in simulator
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def builtin():
    return BuiltinSimulator()


def test_thresholds_and_branches(builtin):
    spec = task(SHIPPING, "shipping_cost(weight_kg, destination, express=False)")
    reply = ask(builtin, spec, "How does the weight affect the cost? Is there a threshold?")
    assert "weight_kg is above 20" in reply and "weight_kg is above 5" in reply
    assert "1.5" in reply and "0.75" in reply
    reply = ask(builtin, spec, "Does the destination matter?")
    assert "'domestic'" in reply and "5.0" in reply and "'europe'" in reply and "15.0" in reply
    reply = ask(builtin, spec, "What does express do?")
    assert "express is True" in reply and "multiplied by 2" in reply


def test_edge_case_and_default(builtin):
    spec = task(SHIPPING, "shipping_cost(weight_kg, destination, express=False)")
    reply = ask(builtin, spec, "What if the weight is zero or negative?")
    assert "weight_kg is at most 0" in reply and "ValueError" in reply and "'weight must be positive'" in reply
    reply = ask(builtin, spec, "Is express optional? What's its default?")
    assert "express is not given, it defaults to False" in reply


def test_rounding(builtin):
    assert "rounded to 2 decimal places" in ask(builtin, task(SHIPPING), "Should I round the cost?")
    reply = ask(builtin, task(BMI), "How precise should the BMI be? Any rounding?")
    assert "rounded to 1 decimal place" in reply
    assert "2 decimals" in ask(builtin, task(TAX), "How many decimals in the total?")


def test_result_format(builtin):
    reply = ask(builtin, task(GRADES), "What keys should the dictionary have?")
    assert "'average', 'top' and 'passed'" in reply
    reply = ask(builtin, task(BMI), "What should the function return?")
    assert "tuple of 2 values" in reply and "the category" in reply
    reply = ask(builtin, task(TAX), "What should the output look like?")
    assert "'Total: $<" in reply
    reply = ask(builtin, task(PASSWORD), "What are the possible return values?")
    assert "'weak'" in reply


def test_category_cutoffs(builtin):
    reply = ask(builtin, task(BMI), "What are the BMI cutoffs for each category?")
    for piece in ("below 18.5", "'underweight'", "below 25", "'normal'", "below 30", "'overweight'", "'obese'"):
        assert piece in reply


def test_items_and_constants(builtin):
    reply = ask(builtin, task(GRADES), "What does each student look like?")
    assert "'score'" in reply and "'name'" in reply
    reply = ask(builtin, task(GRADES), "What counts as passing?")
    assert "at least pass_mark" in reply
    reply = ask(builtin, task(TAX), "What tax rates should I use for each state?")
    assert "'CA' is 0.0725" in reply and "0.05 when missing" in reply


def test_unknown_question_gets_dont_know(builtin):
    for code in (SHIPPING, GRADES, BMI):
        assert ask(builtin, task(code), "What color should the header be?") in DONT_KNOW
        assert ask(builtin, task(code), "Which database vendor do you prefer?") in DONT_KNOW


def test_general_question_tells_untold_facts_first(builtin):
    spec = task(GRADES)
    history: list[dict] = []
    replies = []
    for _ in range(30):
        reply = ask(builtin, spec, "Anything else I should know?", history)
        replies.append(reply)
        if reply == NOTHING_MORE:
            break
        history += [{"role": "assistant", "content": "Anything else I should know?"},
                    {"role": "user", "content": reply}]
    assert replies[-1] == NOTHING_MORE and len(replies) >= 3
    assert "'average', 'top' and 'passed'" in replies[0]  # most important first
    assert len(set(replies)) == len(replies)  # nothing repeated


def test_deterministic(builtin):
    fresh = BuiltinSimulator()
    for code in REFERENCES.values():
        for question in QUESTIONS:
            assert ask(builtin, task(code), question) == ask(fresh, task(code), question)


def test_never_writes_code(builtin):
    seen = 0
    for code in REFERENCES.values():
        spec = task(code)
        for question in QUESTIONS:
            reply = ask(builtin, spec, question)
            assert reply and len(reply) <= 400
            assert_no_code(reply)
            seen += 1
        # Drain every fact through general questions, so each sentence is checked.
        history: list[dict] = []
        for _ in range(40):
            reply = ask(builtin, spec, "Any other details?", history)
            assert_no_code(reply)
            if reply == NOTHING_MORE:
                break
            history += [{"role": "assistant", "content": "Any other details?"}, {"role": "user", "content": reply}]
            seen += 1
    assert seen > 80


@pytest.mark.parametrize("hidden", [
    "def broken(:\n    pass",  # not Python
    "",  # nothing
    "x = 1\ny = [i ** 2 for i in range(10) if i % 2]\n",  # no function
    "The client wants prices in euros. Discounts apply above 100 items.",  # prose
    "async def f(a, *args, b=2, **kw):\n    async with a as c:\n        return [await c]\n",
    "def f(x):\n    def g(y):\n        return y\n    return g(x) if x else {**x, 'k': x @ x}\n",
])
def test_unusual_references_do_not_crash(builtin, hidden):
    for question in ("What should it return?", "Any other details?", "What about x?"):
        reply = ask(builtin, task(hidden), question)
        assert reply and len(reply) <= 400
        assert_no_code(reply)


def test_prose_hidden_information_is_used(builtin):
    spec = TaskSpec("backend", "Write f. The signature of the function is: def f(x)", "def f(x):\n    return x",
                    hidden_information="The client wants prices in euros. Discounts apply above 100 items.")
    assert "euros" in ask(builtin, spec, "Which currency are prices in?")


def test_a_human_who_sees_pages_gets_a_fixed_reply(builtin):
    spec = task("<html><body>hi</body></html>", family="frontend")
    [reply] = builtin.reply([SimRequest(spec, [{"role": "user", "content": "a page"},
                                               {"role": "assistant", "content": "<html></html>"}], medium="pages")])
    assert reply.text == FRONTEND_REPLY and reply.error is None


# ---------------------------------------------------------------------------------------
# Model-backed simulators
# ---------------------------------------------------------------------------------------

DIALOGUE = [
    {"role": "user", "content": (
        "Write shipping_cost. The signature of the function is: def shipping_cost(weight_kg, destination,"
        " express=False)"
    )},
    {"role": "assistant", "content": "What is the base cost for Europe?"},
]


def test_endpoint_simulator_request(openai_server):
    openai_server.set_responder(lambda req: "Human: It is 15 for Europe.")
    spec = task(SHIPPING, "shipping_cost(weight_kg, destination, express=False)")
    sim = EndpointSimulator("sim-model", openai_server.base_url)
    [reply] = sim.reply([SimRequest(spec, DIALOGUE, brief=build_messages)])
    assert reply.text == "It is 15 for Europe." and reply.error is None
    [sent] = openai_server.requests
    assert sent["model"] == "sim-model" and sent["temperature"] == 0.0
    prompt = sent["messages"][-1]["content"]
    assert SHIPPING.strip() in prompt  # the hidden reference
    assert DIALOGUE[0]["content"] in prompt and "What is the base cost for Europe?" in prompt
    assert prompt.index(DIALOGUE[0]["content"]) < prompt.rindex("What is the base cost for Europe?")
    assert "don't know" in prompt and "Never write code" in prompt
    assert sim.ref == f"endpoint:{openai_server.base_url}#sim-model"


def test_endpoint_simulator_failure_is_a_reply_not_an_exception(openai_server, closed_port):
    openai_server.fail_next(10, 500)
    spec = task(SHIPPING)
    sim = EndpointSimulator("m", openai_server.base_url, max_retries=1)
    [reply] = sim.reply([SimRequest(spec, DIALOGUE, brief=build_messages)])
    assert (
        reply.text == ""
        and reply.error == f"endpoint {openai_server.base_url} failed after 2 tries: HTTP 500: injected failure 500"
    )
    down = EndpointSimulator("m", f"http://127.0.0.1:{closed_port}/v1", max_retries=0)
    replies = down.reply([SimRequest(spec, DIALOGUE, brief=build_messages)] * 3)
    assert all(r.text == "" and "unreachable after 1 try: connection refused" in r.error for r in replies)


def test_endpoint_simulator_batches_concurrently_in_order(openai_server):
    """Requests overlap at the server (peak in flight, not a wall-clock bound) and replies keep their order."""
    import threading
    import time

    lock, in_flight, peak = threading.Lock(), [0], [0]

    def slow(req):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.2)
        with lock:
            in_flight[0] -= 1
        return "answer to " + req["messages"][-1]["content"].rsplit("Assistant: ", 1)[1].split("\n")[0]

    openai_server.set_responder(slow)
    sim = EndpointSimulator("m", openai_server.base_url, concurrency=6)
    requests = [SimRequest(task(SHIPPING), [DIALOGUE[0], {"role": "assistant", "content": f"q{i}"}],
                           brief=build_messages) for i in range(6)]
    replies = sim.reply(requests)
    assert peak[0] >= 3  # serially it would be 1
    assert [r.text for r in replies] == [f"answer to q{i}" for i in range(6)]


def test_local_simulator_uses_engine_greedily_with_same_prompt(openai_server):
    openai_server.set_responder(lambda req: "Europe costs 15.")
    engine = OpenAIEngine("local-sim", openai_server.base_url)
    sim = LocalModelSimulator(engine)
    request = SimRequest(task(SHIPPING), DIALOGUE, brief=build_messages)
    [reply] = sim.reply([request])
    assert reply.text == "Europe costs 15." and reply.error is None
    [sent] = openai_server.requests
    assert sent["temperature"] == 0.0 and sent["n"] == 1
    assert sent["messages"] == build_messages(request)
    assert sim.ref == f"local:openai:local-sim@{openai_server.base_url}"
    openai_server.fail_next(10, 400)
    [reply] = sim.reply([request])
    assert reply.text == "" and "HTTP 400" in reply.error


def test_make_simulator(openai_server):
    assert isinstance(make_simulator("builtin", builtin=BuiltinSimulator), BuiltinSimulator)
    sim = make_simulator(f"endpoint:{openai_server.base_url}#meta-llama/Llama-3.1-70B-Instruct")
    assert isinstance(sim, EndpointSimulator) and sim.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert sim.base_url == openai_server.base_url
    built = []
    local = make_simulator(
        "local:hf:/models/x", engine_factory=lambda ref: built.append(ref) or OpenAIEngine("x", openai_server.base_url)
    )
    assert isinstance(local, LocalModelSimulator) and built == ["hf:/models/x"]
    for bad in (
        "", "nope", "endpoint:http://h/v1", "endpoint:#m", "endpoint:ftp://h#m", "local:", "builtin:x", "builtin"
    ):
        with pytest.raises(ValueError) as err:
            make_simulator(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="engine factory"):
        make_simulator("local:hf:/models/x")


def test_a_model_human_on_a_lite_task_is_told_facts_not_code(sqlite_url):
    from colbench.official import spec_of
    from colbench.store.db import Database
    from colbench.tasks.lite import facts_of
    from colbench.wiring import select_tasks

    [task] = [spec_of(t) for t in select_tasks(Database(sqlite_url), "backend-lite:test", 1)]
    [message] = build_messages(SimRequest(task, [{"role": "user", "content": task.problem_description}]))
    text = message["content"]
    assert all(f"- {fact.sentence}" in text for fact in facts_of(task)) and len(facts_of(task)) >= 2
    assert (
        "the code below" not in text
        and "[asked as:" not in text
        and "def " not in text.split("HIDDEN INFORMATION (only")[1].split("CONVERSATION")[0]
    )
    assert "say you don't know" in text
