"""Backend-lite templates: money, work and shopping."""
from __future__ import annotations

from colbench.tasks.lite.schema import Param, Template, rounding

TEMPLATES = (
    Template(
        name="price_with_tax",
        domain="money",
        params="price, quantity",
        requests=(
            (
                "I sell crafts at a weekend market and need the amount a customer pays for several units of a single"
                " item, with sales tax added and the total rounded the way I do it."
            ),
            (
                "Please write a function that gives the price of several units of an item including my local sales"
                " tax, rounded my way."
            ),
            (
                "I want to know what a customer owes for a quantity of a product once sales tax is added, rounded as I"
                " like."
            ),
        ),
        hidden=(
            Param(
                "tax_rate", (5, 6, 7, 8, 9, 12, 13, 15, 19, 20, 21, 23, 25), 10,
                "The sales tax rate is {v} percent.", "What sales tax rate should I apply?",
                ("tax", "vat", "rate", "percent", "percentage"),
            ),
            rounding("total", "the total"),
        ),
        code=(
            "def price_with_tax(price, quantity):\n"
            "    total = price * quantity * (1 + <tax_rate> / 100)\n"
            "    return <rounding>"
        ),
        calls=("19.99, 3", "5, 1", "12.5, 4", "100, 2", "7.25, 10", "0.99, 7", "49.5, 1", "3.3, 3", "250, 1",
               "15, 6", "8.75, 2", "1.2, 12", "64, 5", "2.49, 9"),
    ),
    Template(
        name="split_bill",
        domain="money",
        params="total, people",
        requests=(
            (
                "I always settle the bill when I eat out with friends, so I need each person's share with our usual"
                " tip added, rounded the way our group does it."
            ),
            (
                "Write me a function that splits a restaurant bill evenly between people after adding the tip we"
                " always leave, rounding each share our way."
            ),
            (
                "Our group splits every dinner bill equally, tip included, and rounds each share in a particular way;"
                " I'd like a function for that."
            ),
        ),
        hidden=(
            Param(
                "tip_percent", (5, 8, 10, 12, 15, 18, 22, 25, 30), 20,
                "We always leave a {v} percent tip.", "How much of a tip should I add?",
                ("tip", "gratuity", "percent", "percentage"),
            ),
            Param(
                "rounding", ("up", "down", "nearest"), "cents",
                "{v}", "How should each share be rounded?",
                ("round", "whole", "decimal", "cent", "precision"),
                code={"up": "math.ceil(share)", "down": "math.floor(share)", "nearest": "round(share)",
                      "cents": "round(share, 2)"},
                say={"up": "Each share is rounded up to a whole amount.",
                     "down": "Each share is rounded down to a whole amount.",
                     "nearest": "Each share is rounded to the nearest whole amount."},
            ),
        ),
        code=(
            "def split_bill(total, people):\n"
            "    import math\n"
            "    share = total * (1 + <tip_percent> / 100) / people\n"
            "    return <rounding>"
        ),
        calls=("100, 3", "87.5, 4", "60, 7", "45.2, 2", "200, 6", "12, 5", "99.99, 3", "150, 4", "33.3, 1",
               "20, 3", "75, 8", "10, 6", "56.4, 3", "240, 9", "63.7, 3", "118.4, 7", "41.9, 2", "77.7, 6",
               "132.6, 5", "29.3, 4"),
    ),
    Template(
        name="savings_balance",
        domain="money",
        params="deposit, years",
        requests=(
            (
                "I put a lump sum in my savings account and want to know the balance after some years, with interest"
                " at my bank's rate and added as often as my bank does it."
            ),
            (
                "Please write a function for the balance of my savings account after a number of years: my bank pays a"
                " fixed interest rate and compounds it on its own schedule."
            ),
            (
                "I'd like to see how a deposit grows in my savings account over the years, with my bank's interest"
                " rate and compounding."
            ),
        ),
        hidden=(
            Param(
                "rate", (1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 6, 7), 5,
                "My bank pays {v} percent interest a year.", "What annual interest rate does your bank pay?",
                ("rate", "percent", "percentage", "interest", "apr", "yield", "annual"),
            ),
            Param(
                "compounding", ("monthly", "quarterly", "twice a year"), "yearly",
                "Interest is added {v}.", "How often is the interest compounded?",
                ("compound", "often", "frequency", "frequently", "interest", "monthly", "quarterly", "yearly",
                 "period"),
                code={"monthly": "12", "quarterly": "4", "twice a year": "2", "yearly": "1"},
                say={"monthly": "every month", "quarterly": "every quarter", "twice a year": "twice a year",
                     "yearly": "once a year"},
            ),
        ),
        code=(
            "def savings_balance(deposit, years):\n"
            "    periods = <compounding>\n"
            "    balance = deposit * (1 + <rate> / 100 / periods) ** (periods * years)\n"
            "    return round(balance, 2)"
        ),
        calls=("1000, 1", "500, 3", "2500, 10", "100, 5", "750, 2", "10000, 1", "200, 20", "1234.56, 4", "50, 30",
               "3000, 7", "1000, 0.5", "80, 12"),
    ),
    Template(
        name="convert_currency",
        domain="money",
        params="amount",
        requests=(
            (
                "Before a trip I change money at my bank, and I want a function that tells me how much local currency"
                " I get for an amount, at my bank's exchange rate and after its fee."
            ),
            (
                "Please write a function that converts an amount of my money into the currency of the country I'm"
                " visiting, using the rate my bank gives me and taking off the bank's fee."
            ),
            (
                "I need to know how much foreign cash I end up with for a given amount once my bank converts it and"
                " keeps its fee."
            ),
        ),
        hidden=(
            Param(
                "rate", (0.78, 0.85, 0.88, 0.92, 0.95, 1.1, 1.25, 1.35, 1.5), 1,
                "Each unit of my money buys {v} units of the local currency.", "What exchange rate should I use?",
                ("exchange", "rate", "conversion", "buy"),
            ),
            Param(
                "fee_percent", (0.5, 1, 1.5, 2.5, 3), 2,
                "My bank keeps {v} percent of the converted amount as its fee.", "How big is the bank's fee?",
                ("fee", "commission", "charge", "percent", "percentage", "cut"),
            ),
        ),
        code=(
            "def convert_currency(amount):\n"
            "    converted = amount * <rate>\n"
            "    return round(converted * (1 - <fee_percent> / 100), 2)"
        ),
        calls=("100", "250", "1000", "37.5", "12", "500", "999.99", "80", "1500", "64.2", "5", "333", "73", "412",
               "1234", "58.6", "2750", "19.9", "821", "47.3"),
    ),
    Template(
        name="invoice_total",
        domain="work",
        params="hours",
        requests=(
            (
                "I'm a freelancer and need a function that works out what to bill a client for some hours of work, at"
                " my hourly rate and with my minimum charge."
            ),
            (
                "Write me a function for my invoices: given the hours I worked for a client, return the amount due at"
                " my rate, remembering that I always bill at least a minimum number of hours."
            ),
            (
                "I bill my clients by the hour but never below a minimum; I want a function that gives the invoice"
                " amount for the hours worked."
            ),
        ),
        hidden=(
            Param(
                "hourly_rate", (35, 40, 45, 55, 60, 65, 70, 80, 90), 50,
                "My rate is {v} per hour.", "What is your hourly rate?",
                ("rate", "hourly", "charge", "wage"),
            ),
            Param(
                "minimum_hours", (2, 3, 4), 1,
                "I always bill at least {v} hours.", "What is the minimum number of hours you bill?",
                ("minimum", "least", "min", "smallest", "lowest"),
            ),
        ),
        code=(
            "def invoice_total(hours):\n"
            "    billable = max(hours, <minimum_hours>)\n"
            "    return billable * <hourly_rate>"
        ),
        calls=("0.5", "1", "1.5", "2", "2.5", "3", "3.5", "4", "5", "8", "12", "0.25", "6.5"),
    ),
    Template(
        name="weekly_pay",
        domain="work",
        params="hours_worked, hourly_wage",
        requests=(
            (
                "I run a small shop and want a function for an employee's weekly pay: hours beyond the normal week are"
                " overtime and paid extra."
            ),
            (
                "Please write a function that gives my workers' pay for the week from their hours and hourly wage,"
                " with overtime paid at a higher rate past the regular hours."
            ),
            "I need my staff's weekly wages computed, including overtime pay for the hours over a normal week.",
        ),
        hidden=(
            Param(
                "regular_hours", (35, 36, 37.5, 38, 39), 40,
                "A normal week is {v} hours; anything over that is overtime.",
                "How many hours are in a normal week before overtime starts?",
                ("regular", "normal", "standard", "week", "start", "threshold", "limit"),
            ),
            Param(
                "overtime_rate", (1.25, 1.3, 1.6, 1.75, 2), 1.5,
                "Overtime hours are paid {v} times the hourly wage.", "How much more is an overtime hour paid?",
                ("multiplier", "premium", "extra", "more", "times", "paid"),
            ),
        ),
        code=(
            "def weekly_pay(hours_worked, hourly_wage):\n"
            "    regular = min(hours_worked, <regular_hours>)\n"
            "    overtime = max(0, hours_worked - <regular_hours>)\n"
            "    return round(regular * hourly_wage + overtime * hourly_wage * <overtime_rate>, 2)"
        ),
        calls=("20, 15", "35, 12.5", "36, 20", "37.5, 18", "38, 10", "39, 22", "40, 15", "42, 16.5", "45, 20",
               "50, 12", "60, 25", "44.5, 14"),
    ),
    Template(
        name="discounted_price",
        domain="shopping",
        params="price",
        requests=(
            (
                "In my shop, orders above a certain amount get a discount; please write a function that gives the"
                " price a customer pays."
            ),
            (
                "I want a function that applies my store's discount to a price, but only when the price reaches my"
                " threshold."
            ),
            (
                "Big purchases in my store get a percentage off; I need the final price for a given price, rounded to"
                " cents."
            ),
        ),
        hidden=(
            Param(
                "discount", (5, 12, 15, 20, 25, 30), 10,
                "The discount is {v} percent off.", "How big is the discount?",
                ("discount", "percent", "percentage", "off", "reduction", "big", "large"),
            ),
            Param(
                "threshold", (40, 50, 75, 120, 150, 200), 100,
                "The discount applies when the price is {v} or more.",
                "What is the minimum price to qualify for the discount?",
                ("threshold", "minimum", "above", "least", "over", "qualify", "apply", "start", "discount"),
            ),
        ),
        code=(
            "def discounted_price(price):\n"
            "    if price >= <threshold>:\n"
            "        price = price * (1 - <discount> / 100)\n"
            "    return round(price, 2)"
        ),
        calls=("30", "39.99", "45", "50", "60", "74.5", "80", "99.99", "105", "110", "115", "119.99", "130", "149.99",
               "160", "199", "210", "500"),
    ),
    Template(
        name="shipping_cost",
        domain="shopping",
        params="order_total",
        requests=(
            (
                "My online shop charges a flat shipping fee, but shipping is free for bigger orders; write a function"
                " that gives the shipping cost of an order."
            ),
            (
                "I need a function for my web store's shipping charge: a fixed fee, waived once the order reaches a"
                " certain total."
            ),
            (
                "Please give me a function that returns what a customer pays for shipping on an order, since large"
                " orders ship free."
            ),
        ),
        hidden=(
            Param(
                "free_over", (25, 35, 40, 60, 75), 50,
                "Shipping is free when the order total is {v} or more.", "From what order total is shipping free?",
                ("free", "threshold", "waive", "waived", "minimum", "above", "over"),
            ),
            Param(
                "flat_fee", (3.99, 4.5, 5.95, 6.5, 7.99), 5,
                "Otherwise shipping costs a flat {v}.", "How much is the flat shipping fee?",
                ("fee", "flat", "charge", "much", "fixed", "cost"),
            ),
        ),
        code=(
            "def shipping_cost(order_total):\n"
            "    if order_total >= <free_over>:\n"
            "        return 0\n"
            "    return <flat_fee>"
        ),
        calls=("10", "24.99", "25", "30", "35", "39", "40", "45", "49.99", "52", "55", "58", "60", "70", "74", "75",
               "120"),
    ),
    Template(
        name="loyalty_points",
        domain="shopping",
        params="amount_spent, is_member",
        requests=(
            (
                "My café has a loyalty scheme: customers earn points for each whole unit they spend, and club members"
                " earn more; I need a function for the points of a purchase."
            ),
            "Please write a function that gives the loyalty points a purchase earns, with the bonus our members get.",
            (
                "Customers collect points on every purchase in my bookshop, and members collect extra; write a"
                " function for the points earned."
            ),
        ),
        hidden=(
            Param(
                "points_per_unit", (2, 3, 4, 5, 10), 1,
                "Every whole unit spent earns {v} points.", "How many points does each unit spent earn?",
                ("point", "earn", "unit", "spent"),
            ),
            Param(
                "member_multiplier", (1.5, 2.5, 3, 4, 5), 2,
                "Members get {v} times the normal points.", "How much extra do members get?",
                ("member", "membership", "bonus", "multiplier", "extra", "club"),
            ),
        ),
        code=(
            "def loyalty_points(amount_spent, is_member):\n"
            "    points = int(amount_spent) * <points_per_unit>\n"
            "    if is_member:\n"
            "        points = points * <member_multiplier>\n"
            "    return points"
        ),
        calls=("10.5, False", "10.5, True", "3.99, True", "27, False", "27, True", "99.9, True", "0.5, True",
               "41.2, False", "41.2, True", "7, True", "150.75, True", "13, False"),
        novel=True,
    ),
    Template(
        name="bulk_price",
        domain="shopping",
        params="unit_price, quantity",
        requests=(
            (
                "My wholesale shop gives a discount when someone buys enough units of an item; I need a function that"
                " gives the total price for a quantity."
            ),
            (
                "Please write a function for the total cost of an order of one product, with my bulk discount for"
                " large quantities."
            ),
            (
                "Customers who buy many units at once get money off in my store; write a function that returns the"
                " order total."
            ),
        ),
        hidden=(
            Param(
                "bulk_quantity", (5, 6, 8, 12, 20), 10,
                "The bulk discount starts at {v} units.", "How many units do you need to buy to get the bulk discount?",
                ("many", "unit", "quantity", "threshold", "bulk", "minimum", "start"),
            ),
            Param(
                "bulk_discount", (5, 8, 12, 15, 20), 10,
                "The bulk discount is {v} percent off the total.", "How big is the bulk discount, in percent?",
                ("percent", "percentage", "off", "big", "large", "rate", "bulk", "discount"),
            ),
        ),
        code=(
            "def bulk_price(unit_price, quantity):\n"
            "    total = unit_price * quantity\n"
            "    if quantity >= <bulk_quantity>:\n"
            "        total = total * (1 - <bulk_discount> / 100)\n"
            "    return round(total, 2)"
        ),
        calls=("2.5, 4", "2.5, 5", "3.2, 5", "7, 5", "3, 6", "4.1, 6", "1.99, 7", "4, 8", "3.3, 8", "12.5, 9",
               "0.8, 10",
               "6, 11", "2.25, 12", "1.7, 12", "9.99, 15", "1.1, 19", "3.5, 20", "2.6, 20", "5, 25", "0.45, 100"),
    ),
)
