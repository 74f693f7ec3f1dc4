"""The built-in simulated human on backend-lite tasks (colbench/simulators/rulebased/lite.py):
it states exactly the hidden facts the agent's latest message asks about, says "I don't know."
to anything else, never writes code, and `revealed_facts` says what each reply states."""
from __future__ import annotations

import pytest

from colbench.families import family
from colbench.simulators.base import SimRequest
from colbench.simulators.rulebased.backend import BuiltinSimulator
from colbench.simulators.rulebased.lite import DONT_KNOW, revealed_facts
from colbench.tasks.lite import facts_of, lite_instances, template_of
from colbench.tasks.lite.templates import TEMPLATES
from colbench.tasks.spec import TaskSpec

# Questions an agent might ask instead of the fact's own question: (message, facts it asks for).
PARAPHRASES = {
    "price_with_tax": [("what percentage is the tax?", ["tax_rate"]), ("which rate?", ["tax_rate"]),
                       ("tax?", ["tax_rate"]),
                       ("How many decimals should the total have?", ["rounding"]),
                       ("Should I round the result?", ["rounding"])],
    "split_bill": [("How much do you usually tip?", ["tip_percent"]),
                   ("Do you round the shares up or down?", ["rounding"])],
    "savings_balance": [("What's the interest rate?", ["rate"]),
                        ("Is interest compounded monthly or yearly?", ["compounding"])],
    "convert_currency": [("What is the exchange rate?", ["rate"]),
                         ("Does the bank charge a commission?", ["fee_percent"])],
    "invoice_total": [("How much do you charge per hour?", ["hourly_rate"]),
                      ("Is there a minimum charge?", ["minimum_hours"])],
    "weekly_pay": [("When does overtime start?", ["regular_hours"]),
                   ("What is the overtime multiplier?", ["overtime_rate"])],
    "discounted_price": [("What is the discount?", ["discount"]),
                         ("Above what price does the discount apply?", ["threshold"]),
                         ("How much off do customers get?", ["discount"])],
    "shipping_cost": [("When is shipping free?", ["free_over"]), ("What is the flat fee?", ["flat_fee"])],
    "loyalty_points": [("How many points per unit spent?", ["points_per_unit"]),
                       ("What bonus do members get?", ["member_multiplier"])],
    "bulk_price": [("What quantity triggers the bulk price?", ["bulk_quantity"]),
                   ("What is the discount?", ["bulk_discount"])],
    "daily_water_ml": [("How much water per kg of body weight?", ["ml_per_kg"]),
                       ("How much more do you drink on training days?", ["extra_ml"])],
    "target_heart_rate": [("How do you compute your max heart rate?", ["formula"]),
                          ("What's your resting pulse?", ["resting_hr"])],
    "calories_burned": [("What's the MET of your walk?", ["met"]),
                        ("How many minutes of warm-up should I skip?", ["warmup_minutes"])],
    "sleep_debt": [("What's your sleep goal per night?", ["target_hours"]),
                   ("How many recent nights should I look back?", ["window"])],
    "fuel_cost": [("What's your car's fuel consumption?", ["consumption"]),
                  ("How much do you pay per litre?", ["fuel_price"])],
    "drive_time": [("What is your average speed?", ["speed"]), ("How long do you stop for?", ["break_minutes"]),
                   ("How long is the break?", ["break_minutes"])],
    "baggage_fee": [("How many kilos are allowed for free?", ["allowance"]),
                    ("What is the fee per overweight kilo?", ["per_kg"])],
    "hotel_total": [("What is the city tax?", ["city_tax"]), ("Is there a cleaning charge?", ["cleaning_fee"])],
    "parking_fee": [("Is there a grace period?", ["free_minutes"]), ("What's the hourly rate?", ["hourly_price"]),
                    ("Is there a daily cap?", ["daily_cap"])],
    "scale_recipe": [("How many people is a recipe for?", ["base_servings"]),
                     ("Should I round to the nearest gram?", ["step"])],
    "fan_oven_celsius": [("How much do you reduce the temperature for the fan?", ["reduction"]),
                         ("Does your dial go in steps?", ["step"])],
    "cups_to_grams": [("What does a cup of flour weigh?", ["flour_grams"]), ("And sugar?", ["sugar_grams"])],
    "roast_minutes": [("How long per kilo?", ["per_kg"]), ("Do you add any additional minutes?", ["extra_minutes"])],
    "paint_tins": [("What is the paint's coverage?", ["coverage"]), ("How many layers?", ["coats"]),
                   ("What size are the tins?", ["tin_litres"])],
    "dog_food_grams": [("How many grams per kilo?", ["grams_per_kg"]),
                       ("What do you add for an active day?", ["active_extra"])],
    "tiles_needed": [("What size are the tiles?", ["tile_cm"]),
                     ("How much spare do you add for breakage?", ["waste_percent"])],
    "format_list": [("What is the separator?", ["separator"]),
                    ("Which word goes before the final item?", ["last_joiner"])],
    "make_slug": [("Should words be joined with a hyphen?", ["separator"]),
                  ("How long can a slug be?", ["max_length"])],
    "shorten": [("What's the maximum length?", ["limit"]), ("Should I end with an ellipsis?", ["marker"])],
    "mask_number": [("How many digits stay readable?", ["visible"]),
                    ("Which symbol should I use for masking?", ["mask"])],
    "reading_minutes": [("What reading speed do you assume?", ["wpm"]), ("Should I round up?", ["rounding"])],
    "format_duration": [("Should I use a colon between hours and minutes?", ["separator"]),
                        ("Is there a unit after the minutes?", ["suffix"])],
    "schedule_end": [("What is the meeting duration?", ["meeting_minutes"]),
                     ("Is there a gap between meetings?", ["gap_minutes"]),
                     ("How long is the break?", ["gap_minutes"])],
    "billable_minutes": [("What is your billing increment?", ["block"]), ("Do you round up or down?", ["direction"])],
    "fantasy_points": [("What is a goal worth?", ["goal_points"]), ("And an assist?", ["assist_points"]),
                       ("What's the penalty for a yellow card?", ["card_penalty"])],
    "net_to_par": [("What handicap allowance does your club use?", ["allowance"]), ("What's par?", ["par"])],
    "leaderboard": [("How many teams should be in the top list?", ["top_n"]),
                    ("What format should each line have?", ["label"])],
    "grade_band": [("What is the cut-off for a distinction?", ["distinction"]), ("What about merit?", ["merit"])],
    "final_mark": [("What weight does the exam have?", ["exam_weight"]), ("How many decimals?", ["rounding"])],
    "late_score": [("What's the penalty per day?", ["penalty_per_day"]),
                   ("When does late work get zero?", ["max_days"])],
    "to_scale": [("What scale does your school use?", ["scale"]), ("Should I round the grade?", ["rounding"])],
    "level_from_xp": [("How much xp per level?", ["xp_per_level"]), ("Is there a level cap?", ["max_level"])],
    "dice_score": [("What are ones worth?", ["ones_value"]), ("What if all dice match?", ["same_multiplier"])],
    "hand_value": [("What's an ace worth?", ["ace_value"]), ("What do kings, queens and jacks count?", ["face_value"])],
    "word_score": [("How much is each vowel?", ["vowel_points"]), ("What do consonants score?", ["consonant_points"]),
                   ("What's the long word bonus?", ["long_bonus"])],
    "electricity_bill": [("What is your tariff per kWh?", ["price_per_kwh"]),
                         ("Is there a standing charge?", ["daily_charge"])],
    "appliance_yearly_cost": [("What electricity price do you pay?", ["price_per_kwh"]),
                              ("How often do you use it each week?", ["days_per_week"])],
    "solar_savings": [("How much of the power do you consume yourself?", ["self_use"]),
                      ("What do you get for exported power?", ["feed_in"])],
    "heating_degree_days": [("What is the base temperature?", ["base"]), ("How many decimal places?", ["rounding"])],
    "charging_minutes": [("What's your charger's power?", ["power"]), ("How efficient is charging?", ["loss"])],
}

# Messages that ask about no hidden fact of any template.
NOTHING_ASKED = [
    "Anything else?",
    "Any other details I should know?",
    "Is there anything else I should know about the requirements?",
    "What should the function return?",
    "What are the parameter types?",
    "Should I handle invalid input?",
    "Can you give me an example?",
    "What is your favourite colour?",
    "Do you like jazz music?",
    "Sure, I will write it now.",
    "Thanks!",
    "",
]


@pytest.fixture(scope="module")
def sim():
    return BuiltinSimulator()


@pytest.fixture(scope="module")
def one_per_template():
    chosen = {}
    for item in lite_instances():
        chosen.setdefault(item.template.name, item.spec)
    assert len(chosen) == len(TEMPLATES)
    return chosen


def ask(sim, spec: TaskSpec, message: str, history: list[dict] | None = None) -> str:
    dialogue = [{"role": "user", "content": spec.problem_description}, *(history or []),
                {"role": "assistant", "content": message}]
    [reply] = sim.reply([SimRequest(spec, dialogue)])
    assert reply.error is None
    text = reply.text
    assert "def " not in text and "```" not in text and len(text) <= family("backend").reply_limit
    return text


def expected_reply(spec: TaskSpec, names: list[str]) -> str:
    sentences = {fact.name: fact.sentence for fact in facts_of(spec)}
    return " ".join(sentences[name] for name in names) if names else DONT_KNOW


def test_each_fact_question_gets_exactly_its_sentence(sim, one_per_template):
    for spec in one_per_template.values():
        for fact in facts_of(spec):
            assert ask(sim, spec, fact.question) == fact.sentence, (template_of(spec), fact.name)
            assert revealed_facts(spec, fact.question) == [fact.name]


def test_every_instance_answers_its_own_questions(sim):
    for item in lite_instances()[::7]:
        for fact in facts_of(item.spec):
            assert ask(sim, item.spec, fact.question) == fact.sentence


def test_paraphrases_get_the_fact(sim, one_per_template):
    assert set(PARAPHRASES) == set(one_per_template), "a paraphrase list per template"
    for name, items in PARAPHRASES.items():
        spec = one_per_template[name]
        for message, names in items:
            assert revealed_facts(spec, message) == names, (name, message)
            assert ask(sim, spec, message) == expected_reply(spec, names), (name, message)


def test_general_and_irrelevant_messages_get_i_dont_know(sim, one_per_template):
    for spec in one_per_template.values():
        for message in NOTHING_ASKED:
            assert ask(sim, spec, message) == DONT_KNOW, (template_of(spec), message)
            assert revealed_facts(spec, message) == []


def test_several_questions_get_several_facts_in_the_order_asked(sim, one_per_template):
    for spec in one_per_template.values():
        facts = facts_of(spec)
        names = [fact.name for fact in facts]
        forward = " ".join(fact.question for fact in facts)
        assert ask(sim, spec, forward) == expected_reply(spec, names)
        backward = "Thanks! " + " ".join(fact.question for fact in reversed(facts))
        assert revealed_facts(spec, backward) == names[::-1]
        assert ask(sim, spec, backward) == expected_reply(spec, names[::-1])
        listed = "I need a few details before I start:\n" + "\n".join(
            f"{n}. {fact.question.rstrip('?')}" for n, fact in enumerate(facts, start=1))
        assert revealed_facts(spec, listed) == names, listed
        if len(facts) >= 2:  # one asked, one irrelevant: only the fact
            mixed = f"{facts[1].question} Also, what is your favourite colour?"
            assert ask(sim, spec, mixed) == facts[1].sentence


def test_two_facts_in_one_sentence(sim, one_per_template):
    spec = one_per_template["price_with_tax"]
    assert revealed_facts(spec, "Could you tell me the VAT and how to round?") == ["tax_rate", "rounding"]
    spec = one_per_template["split_bill"]
    assert revealed_facts(spec, "What tip percentage and rounding do you use?") == ["tip_percent", "rounding"]
    spec = one_per_template["bulk_price"]  # a clause that is no question does not ask on its own
    assert revealed_facts(spec, "For the bulk discount, how many units do I need?") == ["bulk_quantity"]
    spec = one_per_template["paint_tins"]
    assert ask(sim, spec, "What's the coverage, how many coats, and what tin size?") == expected_reply(
        spec, ["coverage", "coats", "tin_litres"])


def test_statements_code_and_thinking_reveal_nothing(sim, one_per_template):
    spec = one_per_template["price_with_tax"]
    assert ask(sim, spec, "I will add the tax and round the total.") == DONT_KNOW
    assert ask(sim, spec, "I'll assume a tax rate of ten percent. Is that OK?") == DONT_KNOW
    code = ("Here is my draft:\n```python\ndef price_with_tax(price, quantity):\n    tax_rate = 0.1\n"
            "    return round(price * quantity * (1 + tax_rate), 2)\n```\nDoes this look right?")
    assert ask(sim, spec, code) == DONT_KNOW
    bare_code = (
        "def price_with_tax(price, quantity):\n    tax_rate = 0.1\n\n    # what tax?\n    return price\nIs this right?"
    )
    assert ask(sim, spec, bare_code) == DONT_KNOW
    thinking = "I should ask about the tax rate and the rounding. OUTPUT: What should the function return?"
    assert ask(sim, spec, thinking) == DONT_KNOW and revealed_facts(spec, thinking) == []
    asked_after_thinking = "Let me think. OUTPUT: What is the tax rate?"
    assert ask(sim, spec, asked_after_thinking) == facts_of(spec)[0].sentence
    assert revealed_facts(spec, "I WANT TO ANSWER: def price_with_tax(price, quantity): tax = 0.1") == []
    assert ask(sim, spec, "Please tell me the tax rate.") == facts_of(spec)[0].sentence  # a request without "?"


def test_only_the_latest_message_counts_and_replies_are_deterministic(sim, one_per_template):
    spec = one_per_template["price_with_tax"]
    tax, rounding = facts_of(spec)
    history = [{"role": "assistant", "content": tax.question}, {"role": "user", "content": tax.sentence}]
    assert ask(sim, spec, "Anything else?", history) == DONT_KNOW
    assert ask(sim, spec, rounding.question, history) == rounding.sentence
    assert ask(sim, spec, tax.question, history) == tax.sentence  # asked again, told again
    assert [ask(sim, spec, "tax? and rounding?") for _ in range(3)] == [f"{tax.sentence} {rounding.sentence}"] * 3


def test_revealed_facts_agrees_with_the_reply(sim, one_per_template):
    messages = [*NOTHING_ASKED, "What is the tax rate and how should I round?", "How long is the break?",
                "Which rate?", "tell me everything about the discount"]
    for spec in one_per_template.values():
        facts = facts_of(spec)
        for message in [*messages, *(f.question for f in facts), *(m for m, _ in PARAPHRASES[template_of(spec)])]:
            text = ask(sim, spec, message)
            names = revealed_facts(spec, message)
            assert text == expected_reply(spec, names), (template_of(spec), message)
            stated = [fact.name for fact in facts if fact.sentence in text]
            assert sorted(stated) == sorted(names)


def test_turn_labels_recomputed_from_a_stored_dialogue(one_per_template):
    """A turn's label: its reply revealed a fact that no earlier reply did."""
    spec = one_per_template["price_with_tax"]
    turns = ["Hi! What should the function return?", "What tax rate should I use?", "And the tax rate again?",
             "How should I round the total?", "I WANT TO ANSWER: def price_with_tax(price, quantity): ..."]
    known: set[str] = set()
    labels = []
    for message in turns:
        new = set(revealed_facts(spec, message)) - known
        labels.append(bool(new))
        known |= new
    assert labels == [False, True, False, True, False]
    assert known == {fact.name for fact in facts_of(spec)}


def test_non_lite_backend_tasks_keep_the_old_answers(sim):
    spec = TaskSpec(family="backend",
                    problem_description="Write a function. The signature of the function is: def f(x)",
                    ground_truth="def f(x):\n    if x > 10:\n        return round(x * 0.5, 2)\n    return x")
    general = ask(sim, spec, "Any other details I should know?")
    assert general != DONT_KNOW and "10" in general  # the reference-reading human tells what it knows
    assert revealed_facts(spec, "What is the threshold?") == []
