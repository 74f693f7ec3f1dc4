"""The values only backend-lite's second fresh split takes (``fresh2``).

Every combination of the train, validation, test and novel splits and of the fresh split
(fresh.py) may have been read by the studies so far. The fresh2 split is new instances of the
trained (non-novel) templates: value combinations of each parameter's values (the template's,
FRESH_VALUES' and the values below) that hold at least one value below, so no earlier instance
has them. None of these values appears in any earlier split (neither among the template's own
values nor in FRESH_VALUES); each is of the same kind as its parameter's others (a rate, a fee,
a length), never the naive guess.

Templates whose hidden parameters are all phrases (separators, suffixes) get no new values; a
parameter spoken through a phrase table (``say``) or code table (``code``) gets none either.
A new threshold needs test calls on both sides of it: between it and each neighbouring value
(one call) and between it and the guess (two calls), so some round values are left out.
"""
from __future__ import annotations

FRESH2_VALUES: dict[str, dict[str, tuple]] = {
    "price_with_tax": {"tax_rate": (3, 5.5, 7.7, 14, 24, 27)},
    "split_bill": {"tip_percent": (7, 9, 11, 13, 17)},
    "savings_balance": {"rate": (0.75, 2.75, 3.25, 3.75, 4.25)},
    "convert_currency": {"rate": (0.72, 0.9, 1.05, 1.4), "fee_percent": (1.25, 2.25)},
    "invoice_total": {"hourly_rate": (28, 42, 58, 72, 110), "minimum_hours": (1.5, 5)},
    "weekly_pay": {"regular_hours": (32, 36.5, 38.5), "overtime_rate": (1.2, 1.35, 1.7)},
    # not 90 or 110: a single call (99.99, 105) lies between them and the guess 100
    "discounted_price": {"discount": (7, 22, 35), "threshold": (70, 140, 175)},
    # not 55 (only 52 below it and above the guess 50), not 70 beside 65 (no call in between)
    "shipping_cost": {"free_over": (65, 100), "flat_fee": (2.99, 5.49, 6.99)},
    # not 9 (one call below the guess 10), not 30 or 50 (only the call with 100 units reaches them)
    "bulk_price": {"bulk_quantity": (7, 25), "bulk_discount": (7, 25)},
    "daily_water_ml": {"ml_per_kg": (34, 36, 42), "extra_ml": (150, 550, 700)},
    "calories_burned": {"met": (3.5, 4.3, 5.5, 7.0), "warmup_minutes": (7, 25)},
    "sleep_debt": {"target_hours": (5.5, 7.25, 10), "window": (9, 14)},
    "fuel_cost": {"consumption": (3.8, 6.5, 10.5), "fuel_price": (1.39, 1.68, 1.99)},
    "drive_time": {"speed": (55, 85, 95), "break_minutes": (40, 60)},
    "hotel_total": {"city_tax": (0.5, 4.5, 6), "cleaning_fee": (15, 55, 75)},
    "parking_fee": {"free_minutes": (25, 40, 90), "hourly_price": (1, 4.5, 5), "daily_cap": (10, 22, 35)},
    "scale_recipe": {"base_servings": (9, 24), "step": (20, 50)},
    "cups_to_grams": {"flour_grams": (113, 118, 145), "sugar_grams": (180, 213, 225)},
    "roast_minutes": {"per_kg": (42, 48, 65), "extra_minutes": (5, 18, 45)},
    "dog_food_grams": {"grams_per_kg": (12, 22, 32), "active_extra": (8, 35, 60)},
    "tiles_needed": {"tile_cm": (15, 35, 80), "waste_percent": (7, 25)},
    "make_slug": {"max_length": (13, 21, 34, 40)},
    "shorten": {"limit": (12, 28, 60)},
    "reading_minutes": {"wpm": (120, 130, 225, 325, 375, 450)},
    "schedule_end": {"meeting_minutes": (15, 60, 75), "gap_minutes": (2, 6, 25)},
    "billable_minutes": {"block": (2, 18, 24, 50, 75, 120)},
    "net_to_par": {"allowance": (60, 65, 88), "par": (67, 75)},
    # the calls rank at most 10 entries (and 10 is taken), so 9 is the one new top_n: 5 instances
    "leaderboard": {"top_n": (9,)},
    "grade_band": {"distinction": (72, 83, 95), "merit": (50, 57, 66)},
    "final_mark": {"exam_weight": (10, 15, 28, 38, 52, 62)},
    "to_scale": {"scale": (14, 18, 35, 45, 70, 80)},
    "dice_score": {"ones_value": (6, 15, 20), "same_multiplier": (8, 20)},
    "hand_value": {"ace_value": (12, 16), "face_value": (6, 9)},  # not 7: a description names the card "7"
    "word_score": {"vowel_points": (6,), "consonant_points": (5,), "long_bonus": (8, 25)},
    "electricity_bill": {"price_per_kwh": (0.18, 0.27, 0.36), "daily_charge": (0.25, 0.65, 0.9)},
    "appliance_yearly_cost": {"price_per_kwh": (0.14, 0.22, 0.3)},  # days_per_week: 1-6 are taken, 7 is the guess
    "solar_savings": {"self_use": (25, 55, 80), "feed_in": (0.03, 0.11, 0.15)},
    "charging_minutes": {"power": (6.6, 100, 150), "loss": (6, 14, 25)},
}

PER_TEMPLATE = 11  # fresh2 instances of each template (fewer where fewer combinations make good tests)
