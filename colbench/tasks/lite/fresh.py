"""The values only backend-lite's fresh split takes (``backend-lite:fresh``, stored as ``lite-fresh``).

Every instance of the train, validation and test splits was read by some stage of the first two
backend-lite studies (the warm start's calibration used all 720 train tasks), and most trained
templates have exactly 25 value combinations, all of them used. The fresh split is new instances
of the trained templates: value combinations no earlier instance has, made of each template's
unused combinations and of the values below, which no earlier task holds. Each is a value of the
same kind as its parameter's others (a rate, a fee, a length), never the naive guess.

Templates whose hidden parameters are all phrases (separators, suffixes) get no new values; a
parameter spoken through a phrase table (``say``) or code table (``code``) gets none either.
"""
from __future__ import annotations

FRESH_VALUES: dict[str, dict[str, tuple]] = {
    "price_with_tax": {"tax_rate": (4, 11, 16, 17, 18, 22)},
    "split_bill": {"tip_percent": (6, 14, 16, 24)},
    "savings_balance": {"rate": (1.25, 2.25, 5.5, 8)},
    "convert_currency": {"rate": (0.8, 1.2), "fee_percent": (0.75, 1.75)},
    "invoice_total": {"hourly_rate": (30, 75, 85, 95)},
    "weekly_pay": {"regular_hours": (35.5, 37), "overtime_rate": (1.4, 1.8)},
    "discounted_price": {"discount": (8, 18), "threshold": (60, 80)},
    "shipping_cost": {"free_over": (30, 45), "flat_fee": (3.5, 4.99)},
    "bulk_price": {"bulk_quantity": (4, 15), "bulk_discount": (6, 18)},
    "daily_water_ml": {"ml_per_kg": (32, 38), "extra_ml": (200, 450)},
    "calories_burned": {"met": (3.0, 6.0), "warmup_minutes": (6, 18)},
    "sleep_debt": {"target_hours": (6, 9.5), "window": (2, 8)},
    "fuel_cost": {"consumption": (5, 8.5), "fuel_price": (1.55, 1.95)},
    "drive_time": {"speed": (65, 75), "break_minutes": (5, 35)},
    "hotel_total": {"city_tax": (1, 5), "cleaning_fee": (30, 45)},
    "parking_fee": {},  # 125 combinations, 25 used
    "scale_recipe": {"base_servings": (7, 14, 15, 18)},
    "cups_to_grams": {"flour_grams": (110, 128), "sugar_grams": (185, 205)},
    "roast_minutes": {"per_kg": (38, 55), "extra_minutes": (12, 40)},
    "dog_food_grams": {"grams_per_kg": (18, 28), "active_extra": (12, 40)},
    "tiles_needed": {"tile_cm": (33, 50), "waste_percent": (6, 18)},
    "make_slug": {"max_length": (15, 22, 26, 36)},
    "shorten": {"limit": (18, 35, 45)},
    "reading_minutes": {"wpm": (140, 210, 280, 350, 400)},
    "schedule_end": {"meeting_minutes": (35, 55), "gap_minutes": (4, 12)},
    "billable_minutes": {"block": (7, 9, 14, 16, 40)},
    "net_to_par": {"allowance": (70, 78), "par": (66, 74)},
    "leaderboard": {"top_n": (7, 10)},
    "grade_band": {"distinction": (78, 92), "merit": (52, 63)},
    "final_mark": {"exam_weight": (20, 33, 42, 58, 67)},
    "to_scale": {"scale": (3, 9, 16, 24, 60)},
    "dice_score": {"ones_value": (3, 8), "same_multiplier": (6, 2.5)},
    "hand_value": {"ace_value": (13, 30), "face_value": (8, 13)},
    "word_score": {"vowel_points": (4,)},
    "electricity_bill": {"price_per_kwh": (0.24, 0.29), "daily_charge": (0.35, 0.55)},
    "appliance_yearly_cost": {"price_per_kwh": (0.16, 0.21), "days_per_week": (1,)},
    "solar_savings": {"self_use": (45, 65), "feed_in": (0.04, 0.09)},
    "charging_minutes": {"power": (2.3, 19), "loss": (7, 18)},
}

PER_TEMPLATE = 11  # fresh instances of each template (fewer where fewer combinations make good tests)
