"""Backend-lite templates: health, travel, cooking and home."""
from __future__ import annotations

from colbench.tasks.lite.schema import Param, Template

TEMPLATES = (
    # ------------------------------------------------------------------ health
    Template(
        name="daily_water_ml",
        domain="health",
        params="weight_kg, exercise_minutes",
        requests=(
            (
                "My doctor gave me a rule for how much water to drink a day, based on my weight plus extra when I"
                " exercise; please write a function that gives the millilitres."
            ),
            (
                "I want a function that tells me my daily water target in millilitres from my body weight and the"
                " minutes I exercised, following my own rule."
            ),
            (
                "Please write a function for how much water I should drink in a day: an amount per kilo of body"
                " weight, plus some extra for exercise."
            ),
        ),
        hidden=(
            Param(
                "ml_per_kg", (31, 33, 35, 40, 45), 30,
                "I drink {v} millilitres per kilo of body weight.", "How many millilitres per kilo of body weight?",
                ("kilo", "kg", "weight", "body", "base"),
            ),
            Param(
                "extra_ml", (250, 300, 400, 500, 600), 350,
                "I add {v} millilitres for every full half hour of exercise.",
                "How much extra water do you drink when you exercise?",
                ("exercise", "extra", "workout", "sport", "training", "active", "activity"),
            ),
        ),
        code=(
            "def daily_water_ml(weight_kg, exercise_minutes):\n"
            "    base = weight_kg * <ml_per_kg>\n"
            "    extra = (exercise_minutes // 30) * <extra_ml>\n"
            "    return round(base + extra)"
        ),
        calls=("60, 0", "72, 30", "55, 45", "80, 60", "90, 20", "65.5, 90", "50, 120", "100, 31", "70, 75",
               "58, 0", "85, 150", "47, 60"),
    ),
    Template(
        name="target_heart_rate",
        domain="health",
        params="age, intensity",
        requests=(
            (
                "For my training I want a function that gives my target heart rate for an intensity in percent, using"
                " my resting pulse and the maximum heart rate formula my coach uses."
            ),
            (
                "Please write a function that turns an age and a training intensity in percent into a target heart"
                " rate, the way my coach computes it from the maximum and my resting pulse."
            ),
            (
                "I need my target pulse for a workout intensity, computed from my age with my coach's method, which"
                " uses my resting heart rate."
            ),
        ),
        hidden=(
            Param(
                "formula", ("tanaka", "gellish", "nes"), "classic",
                "{v}", "Which formula do you use for the maximum heart rate?",
                ("maximum", "max", "formula", "method", "highest", "peak"),
                code={"tanaka": "208 - 0.7 * age", "gellish": "207 - 0.7 * age", "nes": "211 - 0.64 * age",
                      "classic": "220 - age"},
                say={"tanaka": "My maximum heart rate is 208 minus 0.7 times my age.",
                     "gellish": "My maximum heart rate is 207 minus 0.7 times my age.",
                     "nes": "My maximum heart rate is 211 minus 0.64 times my age."},
            ),
            Param(
                "resting_hr", (50, 55, 58, 60, 62, 65, 68, 72, 75), 70,
                "My resting heart rate is {v} beats per minute.", "What is your resting heart rate?",
                ("resting", "rest", "pulse", "baseline", "bpm"),
            ),
        ),
        code=(
            "def target_heart_rate(age, intensity):\n"
            "    max_hr = <formula>\n"
            "    return round(<resting_hr> + (max_hr - <resting_hr>) * intensity / 100)"
        ),
        calls=("30, 70", "45, 60", "25, 85", "52, 50", "38, 75", "60, 65", "19, 90", "41, 80", "67, 55", "33, 95",
               "28, 62", "50, 72"),
        novel=True,
    ),
    Template(
        name="calories_burned",
        domain="health",
        params="minutes, weight_kg",
        requests=(
            (
                "I log my walks and want a function for the calories a walk burns from its length in minutes and my"
                " weight, leaving out my warm-up and using the effort value my tracker uses."
            ),
            (
                "Please write a function that estimates the calories I burn walking, from minutes and body weight,"
                " with my activity's effort level and not counting the warm-up."
            ),
            (
                "I need the calories burned on my daily walk, from how long it was and my weight; I don't count the"
                " warm-up."
            ),
        ),
        hidden=(
            Param(
                "met", (2.8, 3.3, 3.8, 4.5, 5), 4,
                "My walking has an effort value (MET) of {v}.", "What MET value should I use for your walking?",
                ("met", "effort", "intensity", "factor", "activity"),
            ),
            Param(
                "warmup_minutes", (8, 10, 12, 15, 20), 5,
                "I don't count the first {v} minutes, which are my warm-up.", "How long is your warm-up?",
                ("warm", "warmup", "first", "skip", "ignore"),
            ),
        ),
        code=(
            "def calories_burned(minutes, weight_kg):\n"
            "    active = max(0, minutes - <warmup_minutes>)\n"
            "    return round(<met> * weight_kg * active / 60)"
        ),
        calls=("30, 70", "45, 62", "60, 85", "25, 55", "90, 78", "15, 90", "40, 66.5", "75, 100", "20, 58",
               "120, 72", "35, 80", "52, 60", "33, 71", "47, 83", "58, 64", "66, 77", "81, 69", "29, 92"),
    ),
    Template(
        name="sleep_debt",
        domain="health",
        params="nights",
        requests=(
            (
                "I track how many hours I sleep each night and want a function that tells me my sleep debt over my"
                " recent nights, compared with the sleep I need."
            ),
            (
                "Please write a function that takes a list of nightly sleep hours and returns how many hours I'm short"
                " over the nights I look back on."
            ),
            (
                "I need a function for my sleep debt: the hours I slept less than my target, summed over recent nights"
                " in a list."
            ),
        ),
        hidden=(
            Param(
                "target_hours", (6.5, 7, 7.5, 8.5, 9), 8,
                "I need {v} hours of sleep a night.", "How many hours of sleep do you need per night?",
                ("target", "goal", "ideal", "hour", "sleep", "night"),
            ),
            Param(
                "window", (3, 4, 5, 6, 10), 7,
                "Only the last {v} nights count.", "How many recent nights should count?",
                ("night", "recent", "last", "window", "back", "period", "lookback"),
            ),
        ),
        code=(
            "def sleep_debt(nights):\n"
            "    recent = nights[-<window>:]\n"
            "    return sum(max(0, <target_hours> - hours) for hours in recent)"
        ),
        calls=(
            "[7, 6.5, 8, 5, 9, 7.5, 6, 8, 7, 6.5, 7, 5.5]",
            "[8, 8, 7, 6, 5.5, 9, 7.5, 6, 7, 8.5]",
            "[6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6]",
            "[9, 9, 8, 7, 6, 5, 4, 5, 6, 7, 8, 9]",
            "[5, 7.5, 6.5, 8, 6, 7, 9, 5.5, 6, 7, 6.5]",
            "[10, 4, 8, 6.5, 7, 7.5, 5, 8, 6, 9, 7, 6]",
            "[7.5, 7, 6.5, 6, 5.5, 5, 4.5, 4, 6, 7, 8]",
            "[8.5, 8, 6, 7, 9, 7, 6.5, 5, 6, 7.5, 8, 6]",
            "[6.5, 6.5, 7, 7, 7.5, 7.5, 8, 8, 8.5, 8.5, 9, 9]",
            "[4, 5, 6, 7, 8, 9, 4, 5, 6, 7, 8]",
            "[7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]",
            "[5.5, 9, 6, 8, 7, 6.5, 7.5, 5, 8.5, 6, 7]",
        ),
    ),
    # ------------------------------------------------------------------ travel
    Template(
        name="fuel_cost",
        domain="travel",
        params="distance_km",
        requests=(
            (
                "Before a road trip I want a function that tells me what the fuel for a distance in kilometres costs,"
                " with my car's consumption and the fuel price I pay."
            ),
            "Please write a function that gives the fuel cost of driving a number of kilometres in my car.",
            (
                "I'd like to know how much a drive costs me in fuel, given the kilometres, my car's fuel use and the"
                " price at my station."
            ),
        ),
        hidden=(
            Param(
                "consumption", (4.5, 5.5, 6.2, 7.8, 9.5), 7,
                "My car uses {v} litres per hundred kilometres.",
                "How much fuel does your car use per hundred kilometres?",
                ("consumption", "economy", "mileage", "efficiency", "hundred", "car"),
            ),
            Param(
                "fuel_price", (1.45, 1.6, 1.72, 1.89, 2.05), 1.5,
                "Fuel costs {v} per litre.", "What does a litre of fuel cost?",
                ("price", "cost", "litre", "liter", "pay", "station"),
            ),
        ),
        code=(
            "def fuel_cost(distance_km):\n"
            "    litres = distance_km * <consumption> / 100\n"
            "    return round(litres * <fuel_price>, 2)"
        ),
        calls=("100", "250", "37", "480", "12.5", "1000", "64", "333", "150", "720", "8", "95"),
    ),
    Template(
        name="drive_time",
        domain="travel",
        params="distance_km",
        requests=(
            (
                "I plan long drives and want a function that gives the total minutes a trip takes, from the distance,"
                " at my usual average speed and with my regular breaks."
            ),
            (
                "Please write a function that estimates how many minutes a drive of some kilometres takes me, breaks"
                " included."
            ),
            "I need the travel time in minutes for a road trip of a given distance, counting the stops I always make.",
        ),
        hidden=(
            Param(
                "speed", (60, 70, 80, 90, 110), 100,
                "I average {v} kilometres per hour.", "What average speed do you drive at?",
                ("speed", "fast", "average", "kmh", "kilometre", "km", "quickly", "velocity"),
            ),
            Param(
                "break_minutes", (10, 20, 25, 30, 45), 15,
                "I stop for {v} minutes after every two full hours of driving.", "How long are your breaks?",
                ("break", "stop", "rest", "pause"),
            ),
        ),
        code=(
            "def drive_time(distance_km):\n"
            "    hours = distance_km / <speed>\n"
            "    breaks = int(hours / 2)\n"
            "    return round(hours * 60 + breaks * <break_minutes>)"
        ),
        calls=("50", "130", "200", "275", "333", "410", "505", "620", "777", "900", "1040", "95", "1250", "180"),
    ),
    Template(
        name="baggage_fee",
        domain="travel",
        params="weight_kg",
        requests=(
            (
                "The airline I always fly charges for a suitcase over its weight allowance; please write a function"
                " that gives the fee for a bag's weight."
            ),
            (
                "I want a function that tells me what I pay for overweight luggage on my usual airline, from the bag's"
                " weight in kilos."
            ),
            (
                "My airline has a free weight allowance and charges for every started kilo above it; write me a"
                " function for the baggage fee."
            ),
        ),
        hidden=(
            Param(
                "allowance", (15, 18, 20, 25, 30), 23,
                "The free allowance is {v} kilos.", "What is the free weight allowance?",
                ("allowance", "free", "allowed", "limit", "maximum", "included"),
            ),
            Param(
                "per_kg", (8, 12, 15, 20, 25), 10,
                "Each started kilo over the allowance costs {v}.", "How much does each extra kilo cost?",
                ("extra", "cost", "fee", "charge", "price", "overweight"),
            ),
        ),
        code=(
            "def baggage_fee(weight_kg):\n"
            "    import math\n"
            "    extra = max(0, math.ceil(weight_kg - <allowance>))\n"
            "    return extra * <per_kg>"
        ),
        calls=("12", "15.5", "17.2", "18.5", "19.9", "21", "22.4", "23.5", "24.1", "26", "28.3", "31", "33.7", "40"),
        novel=True,
    ),
    Template(
        name="hotel_total",
        domain="travel",
        params="nightly_rate, nights, guests",
        requests=(
            (
                "I book holiday rentals and want a function for the full price of a stay: the nightly rate, the city's"
                " tourist tax per guest and night, and the cleaning fee."
            ),
            (
                "Please write a function that gives what a stay costs at my favourite rental, with the local tourist"
                " tax and the one-off cleaning charge."
            ),
            (
                "I need the total cost of a stay from the nightly rate, the number of nights and the number of guests,"
                " tourist tax and cleaning included."
            ),
        ),
        hidden=(
            Param(
                "city_tax", (1.5, 2, 2.5, 3.5, 4), 3,
                "The tourist tax is {v} per guest per night.", "How much is the tourist tax?",
                ("tax", "tourist", "city", "levy", "guest"),
            ),
            Param(
                "cleaning_fee", (20, 25, 35, 40, 60), 50,
                "The cleaning fee is {v}, once per stay.", "How much is the cleaning fee?",
                ("cleaning", "clean", "cleaner", "service"),
            ),
        ),
        code=(
            "def hotel_total(nightly_rate, nights, guests):\n"
            "    tax = <city_tax> * guests * nights\n"
            "    return round(nightly_rate * nights + tax + <cleaning_fee>, 2)"
        ),
        calls=("80, 3, 2", "120, 1, 1", "95.5, 7, 4", "60, 2, 3", "150, 5, 2", "75, 10, 1", "110, 4, 5", "99, 6, 2",
               "200, 2, 6", "65, 14, 2", "130, 3, 3", "89.9, 1, 2"),
    ),
    Template(
        name="parking_fee",
        domain="travel",
        params="minutes",
        requests=(
            (
                "I manage a small car park and need a function that gives the fee for a stay in minutes: a short stay"
                " is free, then every started hour costs the same, up to a daily cap."
            ),
            (
                "Please write a function for my car park's parking charge from the minutes parked, with the free"
                " period, the hourly price and the daily maximum."
            ),
            (
                "Write me a function that returns what a driver pays in my car park for a number of minutes, given my"
                " free minutes, hourly price and cap."
            ),
        ),
        hidden=(
            Param(
                "free_minutes", (10, 15, 20, 45, 60), 30,
                "The first {v} minutes are free.", "How many minutes are free?",
                ("free", "grace", "first"),
            ),
            Param(
                "hourly_price", (1.5, 2, 2.5, 3.5, 4), 3,
                "Each started hour costs {v}.", "How much does each hour cost?",
                ("hour", "hourly", "price", "cost", "rate"),
            ),
            Param(
                "daily_cap", (12, 15, 18, 25, 30), 20,
                "The fee never goes above {v}.", "Is there a maximum fee per day?",
                ("maximum", "max", "cap", "daily", "limit", "most", "ceiling", "day"),
            ),
        ),
        code=(
            "def parking_fee(minutes):\n"
            "    import math\n"
            "    if minutes <= <free_minutes>:\n"
            "        return 0\n"
            "    fee = math.ceil(minutes / 60) * <hourly_price>\n"
            "    return min(fee, <daily_cap>)"
        ),
        calls=("5", "12", "18", "22", "25", "28", "35", "40", "44", "50", "58", "70", "100", "150", "200", "290",
               "350", "430", "500", "610", "800", "1000"),
    ),
    # ------------------------------------------------------------------ cooking
    Template(
        name="scale_recipe",
        domain="cooking",
        params="grams, servings",
        requests=(
            (
                "My recipe book gives every amount for a fixed number of servings; I want a function that scales an"
                " amount in grams to the servings I'm cooking for, rounded like my kitchen scale."
            ),
            (
                "Please write a function that converts a recipe amount in grams to a different number of servings,"
                " rounded the way I weigh things."
            ),
            "I need to scale ingredient weights from my recipes to the number of people I'm cooking for.",
        ),
        hidden=(
            Param(
                "base_servings", (2, 3, 5, 6, 8, 10, 12, 16, 20), 4,
                "My recipes are written for {v} servings.", "How many servings are your recipes written for?",
                ("serving", "original", "recipe", "base", "people", "portion"),
            ),
            Param(
                "step", (5, 10, 25), 1,
                "I round every amount to the nearest {v} grams.", "How should I round the grams?",
                ("round", "nearest", "scale", "precision", "step"),
            ),
        ),
        code=(
            "def scale_recipe(grams, servings):\n"
            "    scaled = grams * servings / <base_servings>\n"
            "    return round(scaled / <step>) * <step>"
        ),
        calls=("250, 3", "100, 7", "480, 2", "75, 9", "333, 5", "1000, 1", "60, 11", "125, 6", "410, 4", "90, 13",
               "700, 15", "55, 8", "185, 10", "140, 3", "215, 7", "365, 9", "47, 5", "610, 11", "88, 6", "1290, 4",
               "63, 3", "137, 7", "89, 9", "211, 4", "17, 3", "143, 5"),
    ),
    Template(
        name="fan_oven_celsius",
        domain="cooking",
        params="fahrenheit",
        requests=(
            (
                "My old recipes give oven temperatures in Fahrenheit, but I have a fan oven in Celsius; write a"
                " function that gives the dial setting I should use."
            ),
            (
                "Please write a function that turns a recipe's Fahrenheit temperature into the Celsius setting for my"
                " fan oven, which runs hotter, rounded to what my dial allows."
            ),
            (
                "I need a function that converts Fahrenheit oven temperatures for my fan oven in Celsius, lowered as I"
                " do for fan ovens and rounded to my dial's steps."
            ),
        ),
        hidden=(
            Param(
                "reduction", (10, 15, 25, 30, 35), 20,
                "For the fan I lower the temperature by {v} degrees Celsius.",
                "How much lower should the fan oven be set?",
                ("fan", "lower", "reduce", "reduction", "subtract", "hotter"),
            ),
            Param(
                "step", (2, 5, 10, 15, 25), 1,
                "My oven dial goes in steps of {v} degrees, so I round to the nearest step.",
                "What steps does your oven dial have?",
                ("dial", "step", "round", "nearest", "increment", "knob"),
            ),
        ),
        code=(
            "def fan_oven_celsius(fahrenheit):\n"
            "    celsius = (fahrenheit - 32) * 5 / 9 - <reduction>\n"
            "    return round(celsius / <step>) * <step>"
        ),
        calls=("350", "325", "400", "375", "425", "300", "450", "275", "390", "360", "410", "340", "475"),
        novel=True,
    ),
    Template(
        name="cups_to_grams",
        domain="cooking",
        params="cups, ingredient",
        requests=(
            (
                "American recipes measure flour and sugar in cups, but I weigh everything; write a function that gives"
                " the grams for a number of cups of flour or sugar, by how my cups weigh out."
            ),
            (
                "Please write a function that converts cups of flour or sugar into grams, rounded to whole grams,"
                " using the weights I measured."
            ),
            (
                "I need a function that turns an amount in cups into grams for either flour or sugar, the way I weigh"
                " them."
            ),
        ),
        hidden=(
            Param(
                "flour_grams", (115, 125, 130, 135, 140), 120,
                "A cup of my flour weighs {v} grams.", "How many grams does a cup of flour weigh?",
                ("flour",),
            ),
            Param(
                "sugar_grams", (190, 195, 198, 210, 220), 200,
                "A cup of my sugar weighs {v} grams.", "How many grams does a cup of sugar weigh?",
                ("sugar",),
            ),
        ),
        code=(
            "def cups_to_grams(cups, ingredient):\n"
            "    if ingredient == \"flour\":\n"
            "        return round(cups * <flour_grams>)\n"
            "    return round(cups * <sugar_grams>)"
        ),
        calls=("1, 'flour'", "2.5, 'flour'", "0.75, 'flour'", "3, 'flour'", "1.5, 'flour'", "0.3, 'flour'",
               "1.7, 'flour'", "2.2, 'flour'", "0.4, 'flour'", "3.6, 'flour'",
               "1, 'sugar'", "0.5, 'sugar'", "2, 'sugar'", "1.25, 'sugar'", "4, 'sugar'", "0.2, 'sugar'",
               "1.3, 'sugar'", "2.7, 'sugar'", "0.6, 'sugar'", "3.1, 'sugar'"),
    ),
    Template(
        name="roast_minutes",
        domain="cooking",
        params="weight_kg",
        requests=(
            (
                "I roast a lot of meat and want a function that gives the cooking time in minutes from the joint's"
                " weight, using my rule of so many minutes per kilo plus a fixed extra."
            ),
            (
                "Please write a function for how long to roast a joint, in whole minutes, from its weight in kilos and"
                " my usual rule."
            ),
            "I need the roasting time for a piece of meat by weight: time per kilo, plus some extra time at the start.",
        ),
        hidden=(
            Param(
                "per_kg", (35, 40, 45, 50, 60), 30,
                "I roast for {v} minutes per kilo.", "How many minutes per kilo?",
                ("kilo", "kg", "weight"),
            ),
            Param(
                "extra_minutes", (10, 15, 25, 30, 35), 20,
                "I add {v} minutes on top.", "How much extra time do you add?",
                ("extra", "additional", "top", "fixed", "buffer"),
            ),
        ),
        code=(
            "def roast_minutes(weight_kg):\n"
            "    return round(weight_kg * <per_kg> + <extra_minutes>)"
        ),
        calls=("1", "1.5", "2", "2.25", "0.8", "3", "1.2", "2.7", "4", "0.5", "3.6", "1.75", "1.1", "1.3", "2.1",
               "3.3", "0.9", "2.4", "4.6", "5.2"),
    ),
    # ------------------------------------------------------------------ home
    Template(
        name="paint_tins",
        domain="home",
        params="area_m2",
        requests=(
            (
                "I'm repainting my flat and want a function that tells me how many tins of paint to buy for a wall"
                " area in square metres, with my paint's coverage and the coats I apply."
            ),
            (
                "Please write a function that gives the number of paint tins I need for an area, given how far my"
                " paint goes, how many coats I do and the tin size."
            ),
            "I need to know how many tins of my usual paint a wall area takes, counting all the coats.",
        ),
        hidden=(
            Param(
                "coverage", (8, 9, 11, 12, 14), 10,
                "A litre of my paint covers {v} square metres.", "How many square metres does a litre of paint cover?",
                ("cover", "coverage", "square", "spread", "litre", "liter"),
            ),
            Param(
                "coats", (1, 3), 2,
                "I always apply {v} coat(s).", "How many coats do you apply?",
                ("coat", "layer"),
            ),
            Param(
                "tin_litres", (2.5, 4, 5), 1,
                "My paint comes in {v} litre tins.", "How big is a tin of paint?",
                ("tin", "size", "big", "bucket", "pot"),
            ),
        ),
        code=(
            "def paint_tins(area_m2):\n"
            "    import math\n"
            "    litres = area_m2 * <coats> / <coverage>\n"
            "    return math.ceil(litres / <tin_litres>)"
        ),
        calls=("10", "17", "23", "31", "38", "44", "52", "61", "70", "85", "99", "120", "140", "163", "190", "230",
               "275", "320"),
        novel=True,
    ),
    Template(
        name="dog_food_grams",
        domain="home",
        params="weight_kg, active",
        requests=(
            (
                "My vet told me how much to feed my dogs per kilo of body weight, with more for active days; please"
                " write a function for the daily grams."
            ),
            (
                "I want a function that gives the grams of food a dog gets per day from its weight, with the extra I"
                " give on active days."
            ),
            (
                "Please write a function for my dog-walking business: the daily food portion in grams from a dog's"
                " weight, more if it was an active day."
            ),
        ),
        hidden=(
            Param(
                "grams_per_kg", (15, 20, 30, 35, 40), 25,
                "A dog gets {v} grams of food per kilo of body weight.",
                "How many grams of food per kilo of body weight?",
                ("kilo", "kg", "weight", "body", "base"),
            ),
            Param(
                "active_extra", (10, 15, 25, 30, 50), 20,
                "On active days the portion is {v} percent bigger.", "How much more food on active days?",
                ("active", "extra", "bonus", "exercise", "percent"),
            ),
        ),
        code=(
            "def dog_food_grams(weight_kg, active):\n"
            "    grams = weight_kg * <grams_per_kg>\n"
            "    if active:\n"
            "        grams = grams * (1 + <active_extra> / 100)\n"
            "    return round(grams)"
        ),
        calls=("8, False", "8, True", "12.5, True", "30, False", "30, True", "4.2, True", "22, False", "17, True",
               "41, True", "6, False", "9.3, True", "55, True", "13, True", "27, True", "7.7, True", "19, False",
               "36, True", "3.1, True"),
    ),
    Template(
        name="tiles_needed",
        domain="home",
        params="length_m, width_m",
        requests=(
            (
                "I'm tiling floors and want a function that tells me how many tiles to buy for a room, with my tile"
                " size and a margin for breakage."
            ),
            (
                "Please write a function that gives the number of square tiles needed for a rectangular floor,"
                " including the spare tiles I always add."
            ),
            (
                "I need to know how many of my tiles a floor of a given length and width takes, with extra for cuts"
                " and breakage."
            ),
        ),
        hidden=(
            Param(
                "tile_cm", (20, 25, 40, 45, 60), 30,
                "My tiles are {v} centimetres square.", "How big are your tiles?",
                ("tile", "size", "big", "centimetre", "centimeter", "cm", "dimension"),
            ),
            Param(
                "waste_percent", (5, 8, 12, 15, 20), 10,
                "I add {v} percent extra for breakage and cuts.", "How much extra do you add for breakage?",
                ("extra", "waste", "breakage", "spare", "margin", "cut", "percent"),
            ),
        ),
        code=(
            "def tiles_needed(length_m, width_m):\n"
            "    import math\n"
            "    count = length_m * width_m / (<tile_cm> / 100) ** 2\n"
            "    return math.ceil(count * (1 + <waste_percent> / 100))"
        ),
        calls=("3, 4", "2.5, 3.1", "5, 5", "1.7, 2.2", "4.4, 3.6", "6, 2.75", "3.3, 3.3", "2, 7.5", "8, 4.25",
               "1.2, 1.9", "10, 3.5", "2.9, 4.1", "7.3, 5.2", "3.8, 2.6", "2.3, 3.7", "4.9, 6.1", "1.3, 5.9",
               "6.7, 3.9",
               "3.1, 2.9", "5.3, 4.7"),
    ),
)
