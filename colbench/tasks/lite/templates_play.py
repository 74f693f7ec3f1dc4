"""Backend-lite templates: sports, school, games and energy."""
from __future__ import annotations

from colbench.tasks.lite.schema import Param, Template, quoted, rounding

LABELS = {
    "colon": ("name + \": \" + str(score)", "Ana: 12", "the name, a colon, a space and the points"),
    "dash": ("name + \" - \" + str(score)", "Ana - 12", "the name, a space, a dash, a space and the points"),
    "paren": ("name + \" (\" + str(score) + \")\"", "Ana (12)", "the name, a space and the points in round brackets"),
    "equals": ("name + \"=\" + str(score)", "Ana=12", "the name, an equals sign and the points, no spaces"),
    "slash": ("name + \" / \" + str(score)", "Ana / 12", "the name, a space, a slash, a space and the points"),
    "space": ("name + \" \" + str(score)", "Ana 12", "the name, a space and the points"),
}

TEMPLATES = (
    # ------------------------------------------------------------------ sports
    Template(
        name="fantasy_points",
        domain="sports",
        params="goals, assists, cards",
        requests=(
            (
                "In our office fantasy football league a player scores points for goals and assists and loses points"
                " for cards; please write a function for a player's points."
            ),
            (
                "Please write a function that gives a player's fantasy points for a match from goals, assists and"
                " cards, under our league's scoring rules."
            ),
            (
                "I run a fantasy league with friends and need the points a player earns in a game: goals and assists"
                " add points, cards take some away."
            ),
        ),
        hidden=(
            Param(
                "goal_points", (3, 4, 5, 6, 8), 1,
                "A goal is worth {v} points.", "How many points is a goal worth?",
                ("goal",),
            ),
            Param(
                "assist_points", (2, 3, 4), 1,
                "An assist is worth {v} points.", "How many points is an assist worth?",
                ("assist",),
            ),
            Param(
                "card_penalty", (2, 3, 5), 1,
                "Each card costs {v} points.", "How many points does a card cost?",
                ("card", "penalty", "booking", "yellow", "red", "lose", "deduct"),
            ),
        ),
        code=(
            "def fantasy_points(goals, assists, cards):\n"
            "    return goals * <goal_points> + assists * <assist_points> - cards * <card_penalty>"
        ),
        calls=("1, 0, 0", "0, 1, 0", "0, 0, 1", "2, 1, 0", "1, 2, 1", "0, 0, 0", "3, 0, 1", "0, 3, 2", "1, 1, 1",
               "2, 0, 2", "0, 2, 0", "4, 1, 0"),
        novel=True,
    ),
    Template(
        name="net_to_par",
        domain="sports",
        params="strokes, handicap",
        requests=(
            (
                "At my golf club we report a round as net strokes relative to the course par, with only part of the"
                " handicap counted; please write a function for it."
            ),
            (
                "Please write a function that gives a golfer's net score against par on my home course, from the"
                " strokes played and the handicap, using our club's handicap allowance."
            ),
            (
                "I need a function for my golf society: the net result relative to par for a round, from strokes and"
                " handicap, the way our club counts the handicap."
            ),
        ),
        hidden=(
            Param(
                "allowance", (75, 80, 85, 90, 95), 100,
                "Only {v} percent of the handicap counts, and the counted handicap is rounded to a whole number.",
                "How much of the handicap counts?",
                ("allowance", "handicap", "percent", "percentage", "portion", "part"),
            ),
            Param(
                "par", (68, 69, 70, 71, 73), 72,
                "Par for the course is {v}.", "What is the par of the course?",
                ("par", "course", "standard"),
            ),
        ),
        code=(
            "def net_to_par(strokes, handicap):\n"
            "    counted = round(handicap * <allowance> / 100)\n"
            "    return strokes - counted - <par>"
        ),
        calls=("85, 12", "90, 18", "78, 4", "101, 28", "72, 0", "95, 21", "88, 14", "80, 9", "110, 36", "76, 7",
               "93, 16", "84, 11"),
    ),
    Template(
        name="leaderboard",
        domain="sports",
        params="scores",
        requests=(
            (
                "For my quiz nights I want a function that takes a dictionary of team names and points and gives the"
                " leaderboard lines, highest points first and ties by name, only the top teams, each written my way."
            ),
            (
                "Please write a function that turns a dictionary of player names and scores into the lines of my"
                " leaderboard: best first, ties in alphabetical order, cut to the top places, in my line format."
            ),
            (
                "I need the leaderboard for my league from a dictionary of names to points, sorted from most points"
                " down with ties alphabetical, showing only the top ones in my format."
            ),
        ),
        hidden=(
            Param(
                "top_n", (2, 4, 5, 6, 8), 3,
                "The leaderboard shows only the top {v}.", "How many places should the leaderboard show?",
                ("top", "many", "place", "cut", "limit", "position"),
            ),
            Param(
                "label", ("colon", "dash", "paren", "equals", "slash"), "space",
                "Each line reads like {v}.", "How should each line be formatted?",
                ("format", "line", "label", "style", "display", "string"),
                code={key: code for key, (code, _, _) in LABELS.items()},
                say={key: f"{quoted(example)}: {words}" for key, (_, example, words) in LABELS.items()},
            ),
        ),
        code=(
            "def leaderboard(scores):\n"
            "    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))\n"
            "    return [<label> for name, score in ranked[:<top_n>]]"
        ),
        calls=(
            '{"Ana": 12, "Ben": 30, "Cleo": 25, "Dev": 8, "Eli": 19, "Fay": 30, "Gus": 3, "Hal": 14, "Ivy": 22}',
            '{"Owls": 41, "Foxes": 37, "Bears": 52, "Larks": 12, "Moles": 37, "Wolves": 29, "Hares": 45}',
            '{"x": 1, "y": 2, "z": 3}',
            (
                '{"Quiz Kids": 80, "Brainy": 75, "Nerds": 90, "Trivia Titans": 60, "Know-Alls": 85, "Smarties": 70,'
                ' "Eggheads": 65, "Wits": 55, "Sages": 50}'
            ),
            '{"Max": 7, "Lou": 7, "Kim": 7, "Jo": 9, "Ike": 2, "Hu": 5}',
            '{"Red": 100, "Blue": 250, "Green": 175, "Gold": 90, "Pink": 60, "Grey": 300, "Teal": 40, "Navy": 210}',
            '{"Alpha": 3, "Beta": 14, "Gamma": 15, "Delta": 9, "Epsilon": 26, "Zeta": 5, "Eta": 35}',
            '{"Sam": 11, "Pat": 17}',
            '{"A": 5, "B": 4, "C": 3, "D": 2, "E": 1, "F": 6, "G": 7, "H": 8, "I": 9, "J": 10}',
            '{"North": 23, "South": 19, "East": 31, "West": 27, "Centre": 15, "Coast": 8}',
        ),
    ),
    # ------------------------------------------------------------------ school
    Template(
        name="grade_band",
        domain="school",
        params="score",
        requests=(
            (
                "I teach a course where a score out of a hundred earns a distinction, a merit or a pass; please write"
                " a function that returns the band as a lowercase word."
            ),
            (
                "Please write a function that gives the result band of an exam score in my course: \"distinction\","
                " \"merit\" or \"pass\", with my own cut-offs."
            ),
            (
                "I need a function that turns an exam score into my course's bands, distinction, merit or pass, as a"
                " lowercase word."
            ),
        ),
        hidden=(
            Param(
                "distinction", (75, 80, 85, 88, 90), 70,
                "A distinction needs a score of {v} or more.", "What score is needed for a distinction?",
                ("distinction", "top", "highest", "best"),
            ),
            Param(
                "merit", (55, 58, 62, 65, 68), 60,
                "A merit needs a score of {v} or more; anything lower is a pass.", "What score is needed for a merit?",
                ("merit", "middle"),
            ),
        ),
        code=(
            "def grade_band(score):\n"
            "    if score >= <distinction>:\n"
            "        return \"distinction\"\n"
            "    if score >= <merit>:\n"
            "        return \"merit\"\n"
            "    return \"pass\""
        ),
        calls=tuple(str(score) for score in range(40, 101)),
    ),
    Template(
        name="final_mark",
        domain="school",
        params="homework, exam",
        requests=(
            (
                "In my class the final mark mixes the homework mark and the exam mark with my own weighting; please"
                " write a function for it, rounded as I report marks."
            ),
            (
                "Please write a function that gives a student's final mark from their homework and exam marks,"
                " weighted my way and rounded the way I like."
            ),
            (
                "I need a function that combines a homework mark and an exam mark into a final mark with my weights"
                " and my rounding."
            ),
        ),
        hidden=(
            Param(
                "exam_weight", (25, 30, 35, 40, 45, 55, 60, 65, 70, 75, 80, 85, 90), 50,
                "The exam counts for {v} percent of the final mark and the homework for the rest.",
                "How much does the exam count?",
                ("weight", "weighting", "exam", "count", "percent", "percentage", "share"),
            ),
            rounding("mark", "the final mark"),
        ),
        code=(
            "def final_mark(homework, exam):\n"
            "    mark = exam * <exam_weight> / 100 + homework * (100 - <exam_weight>) / 100\n"
            "    return <rounding>"
        ),
        calls=("80, 60", "55, 91", "72, 72", "100, 40", "64, 83", "90, 77", "38, 66", "87, 59", "70, 95", "49, 51",
               "93, 68", "61, 74", "72.4, 65.3", "88.6, 91.2", "55.55, 70.1", "63.7, 84.9", "47.2, 58.8", "91.3, 77.6"),
    ),
    Template(
        name="late_score",
        domain="school",
        params="score, days_late",
        requests=(
            (
                "Students in my class lose points for each day an assignment is late, and very late work gets nothing;"
                " please write a function for the score that counts."
            ),
            (
                "Please write a function that applies my late penalty to an assignment score, given how many days late"
                " it was."
            ),
            (
                "I need the score a late assignment keeps under my rules: a penalty per day late, and zero once it is"
                " too late."
            ),
        ),
        hidden=(
            Param(
                "penalty_per_day", (2, 3, 4, 6, 8), 5,
                "Each day late costs {v} points.", "How many points are taken off per day late?",
                ("penalty", "point", "deduct", "deduction", "lose", "off", "cost"),
            ),
            Param(
                "max_days", (2, 3, 4, 5, 6), 7,
                "Work more than {v} days late gets zero.", "After how many days late does the work get zero?",
                ("zero", "cutoff", "deadline", "accept", "accepted", "maximum", "max"),
            ),
        ),
        code=(
            "def late_score(score, days_late):\n"
            "    if days_late > <max_days>:\n"
            "        return 0\n"
            "    return max(0, score - days_late * <penalty_per_day>)"
        ),
        calls=("90, 0", "90, 1", "75, 2", "88, 3", "100, 4", "60, 5", "95, 6", "80, 7", "70, 8", "99, 2", "45, 3",
               "85, 1", "92, 5", "30, 4", "98, 3", "97, 4", "100, 5", "96, 6", "99, 7", "94, 3", "91, 4", "100, 6"),
        novel=True,
    ),
    Template(
        name="to_scale",
        domain="school",
        params="raw, max_raw",
        requests=(
            (
                "My school reports every test on its own grading scale; please write a function that converts raw"
                " points out of a maximum to that scale, rounded the way the school does it."
            ),
            (
                "Please write a function that turns a test's raw score and maximum into a grade on my school's scale,"
                " with the school's rounding."
            ),
            (
                "I need raw test points converted to the scale my school uses for reports, given the maximum points of"
                " the test."
            ),
        ),
        hidden=(
            Param(
                "scale", (4, 5, 6, 7, 8, 10, 12, 15, 20, 25, 30, 40, 50), 100,
                "The school's scale goes from zero to {v}.", "What is the top of the grading scale?",
                ("scale", "top", "maximum", "max", "grading"),
            ),
            rounding("grade", "the grade"),
        ),
        code=(
            "def to_scale(raw, max_raw):\n"
            "    grade = raw / max_raw * <scale>\n"
            "    return <rounding>"
        ),
        calls=("17, 20", "43, 60", "8, 15", "71, 80", "29, 40", "55, 75", "12, 25", "38, 45", "66, 90", "19, 33",
               "47, 52", "9, 11"),
    ),
    # ------------------------------------------------------------------ games
    Template(
        name="level_from_xp",
        domain="games",
        params="xp",
        requests=(
            (
                "In the game I'm making, a player's level depends on their experience points, starting at level one,"
                " with a level cap; write a function that gives the level."
            ),
            (
                "Please write a function that turns experience points into a player level for my game: every so many"
                " points is a level, and there is a maximum level."
            ),
            "I need my game's level for an amount of experience points, levels starting at one and going up to my cap.",
        ),
        hidden=(
            Param(
                "xp_per_level", (120, 150, 200, 250, 300), 100,
                "Every {v} experience points is one more level.", "How many experience points does a level take?",
                ("experience", "xp", "point", "require", "required"),
            ),
            Param(
                "max_level", (10, 15, 20, 30, 40), 50,
                "The highest level is {v}.", "What is the maximum level?",
                ("maximum", "max", "cap", "highest", "limit", "top"),
            ),
        ),
        code=(
            "def level_from_xp(xp):\n"
            "    return min(<max_level>, 1 + xp // <xp_per_level>)"
        ),
        calls=("0", "99", "130", "150", "210", "260", "350", "420", "480", "560", "640", "777", "890", "1100",
               "1250", "2100", "2999", "4200", "5500", "6400", "8100", "9999", "12500", "20000"),
        novel=True,
    ),
    Template(
        name="dice_score",
        domain="games",
        params="dice",
        requests=(
            (
                "In our family dice game a throw scores the sum of the dice, except that ones are worth something"
                " special and a throw where all dice match is multiplied; write a function for the score."
            ),
            (
                "Please write a function that scores a throw of dice, given as a list, under my family's house rules"
                " for ones and for all dice showing the same."
            ),
            (
                "I need the score of a dice throw in a game we play at home: add the dice, with our own value for ones"
                " and a multiplier when every die is the same."
            ),
        ),
        hidden=(
            Param(
                "ones_value", (0, 5, 7, 10, 12), 1,
                "A one is worth {v} points.", "How much is a one worth?",
                ("one", "single", "ace"),
            ),
            Param(
                "same_multiplier", (3, 4, 5, 10, 1.5), 2,
                "When all dice match, the score is multiplied by {v}.", "What happens when all the dice are the same?",
                ("same", "match", "matching", "multiplier", "multiply", "equal", "identical"),
            ),
        ),
        code=(
            "def dice_score(dice):\n"
            "    total = sum(<ones_value> if die == 1 else die for die in dice)\n"
            "    if len(set(dice)) == 1:\n"
            "        total = total * <same_multiplier>\n"
            "    return total"
        ),
        calls=("[1, 2, 3]", "[4, 4, 4]", "[1, 1]", "[6, 5, 1, 2]", "[3, 3]", "[1, 1, 1]", "[2, 5]", "[6, 6, 6, 6]",
               "[1, 4, 6]", "[5]", "[2, 2, 3]", "[1, 6, 6]"),
    ),
    Template(
        name="hand_value",
        domain="games",
        params="cards",
        requests=(
            (
                "In a card game my grandfather taught me, number cards count their number and the picture cards and"
                " the ace have their own values; please write a function for the value of a hand."
            ),
            (
                "Please write a function that adds up a hand of cards, given as strings like \"7\", \"K\" or \"A\", by"
                " our family's card values."
            ),
            (
                "I need the value of a hand in our house card game: number cards count as their number, and jacks,"
                " queens, kings and aces count our way."
            ),
        ),
        hidden=(
            Param(
                "ace_value", (1, 14, 15, 20, 25), 11,
                "An ace is worth {v}.", "How much is an ace worth?",
                ("ace",),
            ),
            Param(
                "face_value", (5, 11, 12, 15, 20), 10,
                "Jacks, queens and kings are each worth {v}.", "How much are the picture cards worth?",
                ("face", "picture", "king", "queen", "jack", "court"),
            ),
        ),
        code=(
            "def hand_value(cards):\n"
            "    values = {\"A\": <ace_value>, \"J\": <face_value>, \"Q\": <face_value>, \"K\": <face_value>}\n"
            "    return sum(values[card] if card in values else int(card) for card in cards)"
        ),
        calls=('["A", "7"]', '["K", "Q"]', '["2", "3", "4"]', '["A", "A", "J"]', '["10", "J"]', '["9", "A", "K", "5"]',
               '["Q"]', '["A"]', '["J", "Q", "K", "A"]', '["6", "6", "A"]', '["K", "8", "2"]', '["3", "A", "Q", "10"]'),
    ),
    Template(
        name="word_score",
        domain="games",
        params="word",
        requests=(
            (
                "For a word game I'm designing, each letter scores points depending on whether it is a vowel or a"
                " consonant, and long words get a bonus; please write a function for a word's score."
            ),
            (
                "Please write a function that scores a word in my word game: vowels and consonants have their own"
                " points, and words of more than six letters get a bonus."
            ),
            (
                "I need the score of a word under my game's rules, with points per vowel, points per consonant and a"
                " bonus for long words."
            ),
        ),
        hidden=(
            Param(
                "vowel_points", (2, 3, 5), 1,
                "Each vowel (a, e, i, o, u) is worth {v} points.", "How many points is a vowel worth?",
                ("vowel",),
            ),
            Param(
                "consonant_points", (2, 3, 4), 1,
                "Each consonant is worth {v} points.", "How many points is a consonant worth?",
                ("consonant",),
            ),
            Param(
                "long_bonus", (5, 15, 20), 10,
                "A word of more than six letters gets a bonus of {v} points.", "How big is the bonus for long words?",
                ("bonus", "long", "length", "extra"),
            ),
        ),
        code=(
            "def word_score(word):\n"
            "    letters = [c for c in word.lower() if c.isalpha()]\n"
            "    score = sum(<vowel_points> if c in \"aeiou\" else <consonant_points> for c in letters)\n"
            "    if len(letters) > 6:\n"
            "        score += <long_bonus>\n"
            "    return score"
        ),
        calls=('"cat"', '"apple"', '"banana"', '"strength"', '"queue"', '"rhythm"', '"education"', '"sky"',
               '"Puzzle"', '"aeiou"', '"crossword"', '"tree"', '"Oboe"', '"lantern"'),
    ),
    # ------------------------------------------------------------------ energy
    Template(
        name="electricity_bill",
        domain="energy",
        params="kwh, days",
        requests=(
            (
                "I want to check my electricity bills: please write a function that gives the amount from the"
                " kilowatt-hours used and the days in the billing period, with my supplier's unit price and daily"
                " standing charge."
            ),
            (
                "Please write a function for my electricity bill, from the energy used in kWh and the number of days,"
                " using my tariff."
            ),
            (
                "I need my power bill computed from the kilowatt-hours and the days of the period, with my tariff's"
                " price per unit and its fixed daily charge."
            ),
        ),
        hidden=(
            Param(
                "price_per_kwh", (0.22, 0.25, 0.28, 0.31, 0.34), 0.2,
                "Each kilowatt-hour costs {v}.", "What is the price per kilowatt-hour?",
                ("price", "unit", "kwh", "kilowatt", "tariff", "rate"),
            ),
            Param(
                "daily_charge", (0.3, 0.45, 0.5, 0.6, 0.75), 0.4,
                "The standing charge is {v} per day.", "How much is the daily standing charge?",
                ("standing", "daily", "fixed", "charge", "day"),
            ),
        ),
        code=(
            "def electricity_bill(kwh, days):\n"
            "    return round(kwh * <price_per_kwh> + days * <daily_charge>, 2)"
        ),
        calls=("300, 30", "125.5, 31", "0, 28", "980, 92", "47, 7", "2400, 365", "610, 61", "333, 30", "75.25, 14",
               "150, 0", "1200, 90", "88, 31"),
    ),
    Template(
        name="appliance_yearly_cost",
        domain="energy",
        params="watts, hours_per_day",
        requests=(
            (
                "I want to know what my appliances cost to run in a year; please write a function from an appliance's"
                " power in watts and the hours it runs on the days I use it."
            ),
            (
                "Please write a function that gives the yearly running cost of an appliance from its wattage and daily"
                " hours of use, with my electricity price and the days a week I use it."
            ),
            (
                "I need the cost per year of running a device, given its watts and the hours a day it is on, on the"
                " days of the week I use it."
            ),
        ),
        hidden=(
            Param(
                "price_per_kwh", (0.12, 0.18, 0.24, 0.27, 0.32), 0.15,
                "Electricity costs me {v} per kilowatt-hour.", "What do you pay per kilowatt-hour?",
                ("price", "kwh", "kilowatt", "tariff", "rate", "electricity", "pay"),
            ),
            Param(
                "days_per_week", (2, 3, 4, 5, 6), 7,
                "I use my appliances {v} days a week, over fifty-two weeks a year.",
                "How many days a week do you use it?",
                ("week", "day", "often", "frequency", "weekly"),
            ),
        ),
        code=(
            "def appliance_yearly_cost(watts, hours_per_day):\n"
            "    kwh = watts / 1000 * hours_per_day * <days_per_week> * 52\n"
            "    return round(kwh * <price_per_kwh>, 2)"
        ),
        calls=("2000, 1", "60, 5", "1500, 0.5", "800, 2", "150, 24", "3000, 0.25", "45, 8", "1200, 1.5", "700, 3",
               "10, 10", "2200, 0.75", "400, 6"),
    ),
    Template(
        name="solar_savings",
        domain="energy",
        params="kwh_produced, grid_price",
        requests=(
            (
                "I have solar panels and want a function for what they save me: the power I use myself saves the grid"
                " price, and the rest is sold back at the feed-in rate."
            ),
            (
                "Please write a function that gives the money my solar panels earn from the kilowatt-hours they"
                " produce and the grid price, with the share I use myself and my feed-in tariff."
            ),
            (
                "I need the value of my solar power: what I consume myself counts at the grid price and the surplus at"
                " my export rate."
            ),
        ),
        hidden=(
            Param(
                "self_use", (30, 35, 40, 60, 70), 50,
                "I use {v} percent of what the panels produce myself.", "What share of the power do you use yourself?",
                ("share", "yourself", "self", "consume", "consumption", "percent", "percentage", "own"),
            ),
            Param(
                "feed_in", (0.05, 0.06, 0.08, 0.1, 0.12), 0.07,
                "Power sold back to the grid earns {v} per kilowatt-hour.",
                "What is the feed-in rate for the power you sell back?",
                ("feed", "export", "sell", "sold", "back", "surplus", "tariff"),
            ),
        ),
        code=(
            "def solar_savings(kwh_produced, grid_price):\n"
            "    used = kwh_produced * <self_use> / 100\n"
            "    return round(used * grid_price + (kwh_produced - used) * <feed_in>, 2)"
        ),
        calls=("1000, 0.3", "250, 0.28", "4200, 0.25", "80, 0.35", "1500, 0.22", "333, 0.31", "5000, 0.2",
               "720, 0.4", "60, 0.27", "2750, 0.33", "12, 0.3", "900, 0.18"),
    ),
    Template(
        name="heating_degree_days",
        domain="energy",
        params="temperatures",
        requests=(
            (
                "To follow my heating use I count heating degree days: for each day's average temperature in a list,"
                " the degrees below my base temperature add up; please write a function for the total, rounded my way."
            ),
            (
                "Please write a function that gives the heating degree days of a list of daily mean temperatures in"
                " Celsius, with my base temperature and rounding."
            ),
            (
                "I need the heating degree days for a list of daily temperatures: days colder than my base temperature"
                " count by how much colder they are."
            ),
        ),
        hidden=(
            Param(
                "base", (12, 13, 14, 15, 15.5, 16, 16.5, 17, 17.5, 19, 19.5, 20, 21), 18,
                "My base temperature is {v} degrees Celsius.", "What base temperature should I use?",
                ("base", "baseline", "reference", "threshold", "temperature", "balance"),
            ),
            rounding("total", "the total"),
        ),
        code=(
            "def heating_degree_days(temperatures):\n"
            "    total = sum(max(0, <base> - t) for t in temperatures)\n"
            "    return <rounding>"
        ),
        calls=("[10.2, 12.5, 8.1, 15.3, 17.8]", "[5, 3.5, -1.2, 0.4, 2.2, 4.8, 7.1]", "[14.6, 16.2, 13.9]",
               "[20.5, 22.1, 19.3, 18.4]", "[-3.3, -5.1, -2.6, 0.7, 1.9]", "[11.11, 12.22, 13.33, 14.44]",
               "[16.7, 17.2, 15.9, 18.6, 19.4, 14.2]", "[8.8]", "[12.4, 12.6, 12.8, 13.1, 13.3]",
               "[9.95, 10.05, 15.55]",
               "[19.9, 19.1, 18.3, 17.7, 16.9]", "[2.25, 4.75, 6.35, 7.45]", "[13.37, 11.92, 14.61]",
               "[7.73, 9.18, 12.06, 10.44]", "[15.27, 16.83, 18.91, 12.02]", "[4.17, 6.29]"),
        novel=True,
    ),
    Template(
        name="charging_minutes",
        domain="energy",
        params="battery_kwh, from_percent, to_percent",
        requests=(
            (
                "I drive an electric car and want a function for how many minutes a home charge takes, from the"
                " battery size and the charge level before and after, with my charger's power and the energy lost"
                " while charging."
            ),
            (
                "Please write a function that estimates the charging time in whole minutes for my electric car between"
                " two battery percentages, with my wall charger and its losses."
            ),
            (
                "I need to know how long charging my car takes at home, in minutes, from the battery capacity and the"
                " start and end percentages."
            ),
        ),
        hidden=(
            Param(
                "power", (3.7, 7.4, 11, 22, 50), 7,
                "My charger delivers {v} kilowatts.", "How powerful is your charger, in kilowatts?",
                ("charger", "power", "kilowatt", "kw", "powerful", "wallbox"),
            ),
            Param(
                "loss", (5, 8, 12, 15, 20), 10,
                "About {v} percent of the energy is lost while charging.", "How much energy is lost while charging?",
                ("loss", "lost", "efficiency", "efficient", "waste", "percent", "lose"),
            ),
        ),
        code=(
            "def charging_minutes(battery_kwh, from_percent, to_percent):\n"
            "    needed = battery_kwh * (to_percent - from_percent) / 100\n"
            "    hours = needed / (1 - <loss> / 100) / <power>\n"
            "    return round(hours * 60)"
        ),
        calls=("60, 20, 80", "75, 10, 90", "40, 50, 100", "82, 30, 70", "58, 5, 95", "100, 0, 100", "64, 45, 85",
               "52, 15, 60", "77, 25, 80", "45, 60, 90", "90, 12, 88", "33, 40, 100"),
    ),
)
