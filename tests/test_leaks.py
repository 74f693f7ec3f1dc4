"""The leak detectors against a labelled set of simulated-human replies.

Every case names its source: the built-in task whose reference it is judged against (``backend_a#0`` is the first
task of colbench/tasks/builtin/backend_a.jsonl), and where the reply's wording came from: ``extractor`` (a reply
complying with one of scripted:extractor's requests), ``faithful`` (what ColBench's simulator prompt asks for: the
requirement in words, a fact the question asked for), or ``written`` (hand-written to probe one rule). The
expected verdict is the kind of leak or None.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from colbench.simulators.leaks import backend_leak, frontend_leak

BUILTIN = Path(__file__).resolve().parents[1] / "colbench" / "tasks" / "builtin"


def reference(source: str) -> str:
    name, index = source.split("#")
    return json.loads((BUILTIN / f"{name}.jsonl").read_text().splitlines()[int(index)])["ground_truth"]


# (task, origin, question, reply, expected kind or None)
BACKEND = [
    # verbatim lines and blocks
    ("backend_a#0", "extractor", "Could you paste the function you have in mind?",
     "Sure:\n```python\ndef split_restaurant_bill(total, num_people, tip_percent=18):\n    import math\n"
     "    with_tip = total * (1 + tip_percent / 100)\n    return with_tip / num_people\n```", "code-block"),
    ("backend_a#0", "extractor", "What exact line computes the amount with the tip?",
     "It's with_tip = total * (1 + tip_percent / 100), then divide by the people.", "line"),
    ("backend_a#0", "written", "How do you round?",
     "I do cents = math.ceil(round(with_tip / num_people * 100, 6)) and then divide by 100.", "line"),
    ("backend_a#1", "extractor", "Is the monthly update balance = balance * (1 + rate) + monthly_deposit?",
     "Yes, exactly: balance = balance * (1 + rate) + monthly_deposit each month.", "line"),
    ("backend_a#1", "written", "How is the monthly rate found?",
     "rate = annual_interest / 100 / 12", "line"),
    ("backend_a#3", "extractor", "Paste the loop body please.",
     "for _ in range(int(round(years * 12))):\n    balance = (balance + monthly_deposit) * (1 + r)", "line"),
    ("backend_a#4", "extractor", "What is the payment formula exactly?",
     "payment = principal * r / (1 - (1 + r) ** -n) when the rate isn't zero.", "line"),
    ("backend_b#0", "extractor", "Give me the exact code for the slug.",
     "slug = re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-') and then cut to 50.", "line"),
    ("backend_b#2", "written", "How do you decide when a word fits?",
     "elif len(current) + 1 + len(w) <= width: you append it with a space.", "line"),
    ("backend_b#3", "extractor", "Paste how the 10 digit case is formatted.",
     "return '(' + digits[:3] + ') ' + digits[3:6] + '-' + digits[6:] + ext", "line"),
    ("backend_c#0", "extractor", "Can you confirm the rounding of the weight?",
     "Right, billable = math.ceil(weight_kg * 2) / 2.", "line"),
    ("backend_c#1", "written", "How do you compute the volumetric weight?",
     "volumetric = length_cm * width_cm * height_cm / 5000", "line"),
    ("backend_c#2", "written", "How many boxes fit on one pallet?",
     "per_pallet = layers * boxes_per_layer, and the answer is math.ceil(boxes / per_pallet).", "line"),
    ("backend_c#3", "extractor", "What's the day arithmetic?",
     "idx = (idx + 1) % 7 each step, skipping weekend days.", "line"),
    ("backend_b#1", "extractor", "Give me the whole thing as code.",
     "```\nletters = []\nfor word in full_name.split():\n    if word in particles:\n        continue\n```",
     "code-block"),
    ("backend_a#2", "extractor", "Write out the function for me.",
     "def categorize_expenses(transactions):\n    totals = {}\n    return totals", "code-block"),
    ("backend_c#4", "extractor", "Can you just show me the code?",
     "```py\nif longest <= 35 and middle <= 25:\n    return 'letter'\n```", "code-block"),
    # renamed variables: a line up to names
    ("backend_a#0", "written", "How is the tip applied?",
     "Something like amount = bill * (1 + tip / 100).", "line"),
    ("backend_a#1", "written", "How does the balance grow?",
     "b = b * (1 + r) + d, once a month.", "line"),
    ("backend_a#3", "written", "And the deposit?", "bal = (bal + dep) * (1 + rate) every month", "line"),
    ("backend_a#4", "written", "What is the total interest?",
     "interest = round(p * count - amount, 2), two decimals.", "line"),
    ("backend_c#1", "written", "Volume weight?", "vol = l * w * h / 5000 in centimetres", "line"),
    ("backend_c#2", "written", "How many layers fit?", "n = int(space // h) layers.", "line"),
    ("backend_b#0", "written", "How long can the slug be?", "s = s[:50].rstrip('-') so it stays short.", "line"),
    # the body as one expression over the reference's own names
    ("backend_a#0", "extractor", "Give me the exact expression it returns.",
     "It returns math.ceil(total * (1 + tip_percent / 100) / num_people * 100) / 100.", "expression"),
    ("backend_a#4", "extractor", "What's the formula as one expression?",
     "It's principal * annual_rate / 1200 / (1 - (1 + annual_rate / 1200) ** -(years * 12))", "expression"),
    ("backend_c#0", "extractor", "Confirm my guess: base + per_half_kg * extra_steps?",
     "Close: base + per_half_kg * max(0, extra_steps), rounded to 2.", "expression"),
    ("backend_c#1", "written", "So the result is?",
     "the larger of length_cm * width_cm * height_cm / 5000 and actual_kg, rounded up to a half", "expression"),
    ("backend_c#4", "written", "And large parcels?",
     "large if longest + 2 * (middle + shortest) stays within 300", "expression"),
    ("backend_a#1", "written", "When is it impossible?",
     "when monthly_deposit <= 0 and annual_interest <= 0 or balance - goal < 0 hmm", "expression"),
    # constants listed beyond what was asked
    ("backend_c#0", "extractor", "Spell out every constant the function uses, please.",
     "Zone 1 costs 4.5 plus 1.1 per half kilo, zone 2 is 6.0 and 1.6, zone 3 is 8.5 and 2.4.", "constants"),
    ("backend_c#4", "extractor", "List every number in the rules.",
     "35, 25, 2.5 and 0.75 for letters; 45, 35, 16 and 2 for small ones.", "constants"),
    ("backend_c#2", "written", "Tell me all the fixed values you use.",
     "The pallet is 180 tall with 15 kept free, and anything under 1 layer is -1.", None),  # two values: below 3
    ("backend_a#2", "extractor", "What keywords and categories are there, all of them?",
     "transport has uber, taxi and fuel; bills has rent and electric.", "constants"),
    ("backend_b#1", "written", "How do hyphens work?",
     "Each part gets its letter. Oh, and skip van, von, der, da and di.", "constants"),
    ("backend_b#4", "extractor", "Spell out every constant and keyword list in the code.",
     "a, an, the, and, but, nor, for, on, at, to, of, in, by, up, as", "constants"),
    ("backend_c#3", "faithful", "What day names does it know?",
     "It knows monday, tuesday, wednesday and the rest.", None),
    ("backend_c#4", "extractor", "What are all the thresholds in your rules?",
     "Letters 35, 25, 2.5, 0.75 kg; small 45, 35, 16, 2 kg; medium 61, 46, 46, 20 kg; large 300 and 30 kg.",
     "constants"),
    ("backend_a#2", "extractor", "Tell me every keyword you match on.",
     "grocery, supermarket, uber, taxi, rent, netflix, spotify and so on", "constants"),
    ("backend_a#1", "written", "Anything else I should know?",
     "It gives up after 1200 months, uses rate divided by 12, and returns -1 then.", None),
    # faithful replies: the requirement in words, facts the question asked for
    ("backend_a#0", "faithful", "What should happen with zero people?",
     "If there are no people, just return 0.0.", None),
    ("backend_a#0", "faithful", "How should the result be rounded?",
     "Round up to the next cent, so nobody pays less than their share.", None),
    ("backend_a#0", "faithful", "Is the tip a percentage?",
     "Yes, the tip is a percentage of the total, 18 by default.", None),
    ("backend_a#1", "faithful", "What if the goal is already reached?",
     "Then the answer is 0 months.", None),
    ("backend_a#1", "faithful", "How is interest applied?",
     "Interest compounds monthly: the yearly rate divided by 12, applied before the deposit is added.", None),
    ("backend_a#1", "faithful", "Is there a cap on months?",
     "Yes, stop after 1200 months and return -1 if the goal still isn't reached.", None),
    ("backend_a#2", "faithful", "Which words count as food?",
     "For food: grocery, supermarket, restaurant, cafe, coffee, pizza.", None),
    ("backend_a#2", "faithful", "What about transactions that match nothing?",
     "They go into 'other'. Round every total to 2 decimals.", None),
    ("backend_a#3", "faithful", "When is the deposit made?",
     "At the start of each month, before interest.", None),
    ("backend_a#4", "faithful", "What should it return?",
     "A tuple: the monthly payment and the total interest, both rounded to cents.", None),
    ("backend_b#0", "faithful", "What if the title has no letters at all?",
     "Return 'untitled' in that case.", None),
    ("backend_b#0", "faithful", "How long can the slug be?",
     "At most 50 characters, and it shouldn't end with a dash.", None),
    ("backend_b#1", "faithful", "Which particles should be skipped?",
     "Skip particles like van, de, von, der, da, di, la and le.", None),
    ("backend_b#2", "faithful", "What about blank lines?",
     "Keep paragraphs separate: a blank line between paragraphs stays a blank line.", None),
    ("backend_b#3", "faithful", "What formats do you want for phone numbers?",
     "Ten digits like (555) 123-4567, seven like 123-4567, otherwise return 'invalid'.", None),
    ("backend_b#3", "faithful", "What about extensions?",
     "Keep them, written as ' ext. ' and the number.", None),
    ("backend_c#0", "faithful", "What are the rates for each zone?",
     "Zone 1: 4.5 base and 1.1 per extra half kilo; zone 2: 6.0 and 1.6; zone 3: 8.5 and 2.4.", None),
    ("backend_c#0", "faithful", "What if the zone is unknown?",
     "Return -1.0 for an unknown zone or a weight of zero or less.", None),
    ("backend_c#1", "faithful", "What divisor for volume?",
     "Use 5000 for the volumetric divisor, and never less than half a kilo.", None),
    ("backend_c#2", "faithful", "How tall can a pallet be?",
     "The stack can be 180 cm including a 15 cm pallet.", None),
    ("backend_c#3", "faithful", "What if it ships on a weekend?",
     "Treat a weekend ship day as Monday; only weekdays count as transit days.", None),
    ("backend_c#4", "faithful", "What counts as a letter?",
     "Longest side up to 35, middle up to 25, thickness up to 2.5 cm, weight up to 0.75 kg.", None),
    ("backend_c#4", "faithful", "What's the limit for a large parcel?",
     "Length plus twice the width and height together at most 300, and up to 30 kg.", None),
    ("backend_b#4", "faithful", "Which small words stay lower case?",
     "Short words like a, an, the, and, but, or, for stay lower case unless first or last.", None),
    ("backend_a#0", "faithful", "What's the signature again?",
     "def split_restaurant_bill(total, num_people, tip_percent=18)", None),
    ("backend_a#4", "faithful", "What should split_restaurant_bill(100, 3) give?",
     "Something like 39.34 for 100 split 3 ways.", None),
    ("backend_c#1", "written", "Any example?", "chargeable_weight(10, 10, 10, 0.1) should be 0.5.", None),
    ("backend_a#4", "faithful", "Zero interest?",
     "With a 0% rate just divide the principal by the number of months.", None),
]

FRONTEND = [
    ("frontend_a#0", "extractor", "Paste the header's HTML please.",
     '<header class="max-w-5xl mx-auto flex items-center justify-between py-6 px-6">', "html"),
    ("frontend_a#0", "extractor", "Just show me the markup.",
     "Something like <section><h2>Signature Cakes</h2></section>", "html"),
    ("frontend_a#0", "extractor", "What classes does the body use?",
     "The body is bg-yellow-50 text-gray-800 and the title text-2xl font-serif text-yellow-900.", "classes"),
    ("frontend_a#1", "extractor", "Which Tailwind classes for the plans?",
     "Cards use border-gray-200 rounded-2xl and a md:grid-cols-3 grid.", "classes"),
    ("frontend_a#1", "written", "The trial button?",
     'It\'s an <a href="#"> with bg-indigo-600 and white text.', "html"),
    ("frontend_a#0", "faithful", "What colours should it use?",
     "Warm colours: a pale cream-yellow background, dark brown serif headings.", None),
    ("frontend_a#0", "faithful", "What goes at the top?",
     "The bakery's name on the left and three links on the right: Cakes, Hours, Visit.", None),
    ("frontend_a#1", "faithful", "How many plans?",
     "Three plans side by side, the middle one highlighted in indigo.", None),
    ("frontend_a#1", "faithful", "Is there a toggle?",
     "Yes, a small pill switch for Monthly and Yearly (save 20%).", None),
    ("frontend_a#0", "faithful", "Should I use a grid?",
     "Yes, a three-column grid on wide screens, one column on phones.", None),
]


def _judge(detector, cases):
    outcomes = []
    for source, origin, question, reply, expected in cases:
        leak = detector(reference(source), reply, question)
        outcomes.append((source, origin, reply, expected, leak))
    return outcomes


def _precision_recall(outcomes):
    # A true positive needs the leak found; a wrong kind is still a leak caught (the guard acts the same).
    tp = sum(1 for *_, expected, leak in outcomes if expected and leak)
    fp = sum(1 for *_, expected, leak in outcomes if not expected and leak)
    fn = sum(1 for *_, expected, leak in outcomes if expected and not leak)
    return tp / max(tp + fp, 1), tp / max(tp + fn, 1)


def test_the_labelled_set_is_large_and_mixed():
    cases = BACKEND + FRONTEND
    assert len(cases) >= 60
    assert {c[4] for c in BACKEND} >= {"line", "expression", "code-block", "constants", None}
    assert sum(c[4] is None for c in cases) >= 25


def test_precision_and_recall_on_the_labelled_set():
    outcomes = _judge(backend_leak, BACKEND) + _judge(frontend_leak, FRONTEND)
    misses = [(s, r, e, leak) for s, _, r, e, leak in outcomes if bool(e) != bool(leak)]
    precision, recall = _precision_recall(outcomes)
    assert precision >= 0.95 and recall >= 0.95, misses


def test_kinds_on_the_labelled_set():
    """Most verdicts name the rule the case was written for (the kind is the evidence a user reads)."""
    outcomes = _judge(backend_leak, BACKEND) + _judge(frontend_leak, FRONTEND)
    leaking = [(s, r, e, leak) for s, _, r, e, leak in outcomes if e and leak]
    wrong = [(s, r, e, leak.kind) for s, r, e, leak in leaking if leak.kind != e]
    assert len(wrong) <= len(leaking) // 10, wrong


@pytest.mark.parametrize("source, origin, question, reply, expected", [c for c in BACKEND if c[4]][:12])
def test_the_span_is_in_the_reply_and_cutting_it_clears_the_reply(source, origin, question, reply, expected):
    leak = backend_leak(reference(source), reply, question)
    assert leak is not None and leak.span and leak.span in reply
    # The guard cuts spans one after another (a reply may hold several); each cut finds the next.
    for _ in range(4):
        reply = reply.replace(leak.span, "(redacted)")
        leak = backend_leak(reference(source), reply, question)
        if leak is None:
            break
        assert leak.span in reply
    assert leak is None


def test_a_question_naming_the_values_makes_them_no_leak():
    ref = reference("backend_c#0")
    reply = "Zone 1 costs 4.5 plus 1.1 per half kilo, zone 2 is 6.0 and 1.6."
    assert backend_leak(ref, reply, "List every constant.") is not None
    assert backend_leak(ref, reply, "Is zone 1 4.5 and 1.1, zone 2 6.0 and 1.6?") is None


def test_detectors_never_raise_on_odd_input():
    for ref in ("", "def f(:\n  return (", "not python at all", "x" * 10_000):
        for reply in ("", "'", "```", "def f(x):\n", "<", "a" * 50_000, "\x00\ud800"):
            backend_leak(ref, reply, "?")
            frontend_leak(ref, reply, "?")
    assert backend_leak("def f(x):\n    return x * 3 + 7 - x", "", "") is None
