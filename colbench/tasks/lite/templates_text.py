"""Backend-lite templates: text formatting, and times and durations."""
from __future__ import annotations

from colbench.tasks.lite.schema import Param, Template, quoted

TEMPLATES = (
    # ------------------------------------------------------------------ text
    Template(
        name="format_list",
        domain="text",
        params="items",
        requests=(
            (
                "For my newsletter I want a function that turns a list of words into one readable phrase, written the"
                " way I like lists to look."
            ),
            (
                "Please write a function that joins a list of strings into a single line, with my own separator"
                " between items and my own word before the last one."
            ),
            (
                "I need a function that writes a list of items as a phrase, with the punctuation and the final joining"
                " word I use."
            ),
        ),
        hidden=(
            Param(
                "separator", ("; ", " / ", " | ", " - ", " + "), ", ",
                "Between the items I put {v}.", "What should I put between the items?",
                ("separator", "separate", "between", "delimiter", "comma", "punctuation"),
                code=None,
                say={"; ": quoted("; ") + " (a semicolon and a space)",
                     " / ": quoted(" / ") + " (a slash with a space on each side)",
                     " | ": quoted(" | ") + " (a vertical bar with a space on each side)",
                     " - ": quoted(" - ") + " (a dash with a space on each side)",
                     " + ": quoted(" + ") + " (a plus sign with a space on each side)"},
            ),
            Param(
                "last_joiner", (" & ", " or ", " plus ", " and also ", " then "), " and ",
                "Before the last item I put {v} instead of the separator.", "What goes before the last item?",
                ("last", "final", "conjunction", "before", "end"),
                say={" & ": quoted(" & ") + " (an ampersand with a space on each side)",
                     " or ": quoted(" or ") + " (the word or, with a space on each side)",
                     " plus ": quoted(" plus ") + " (the word plus, with a space on each side)",
                     " and also ": quoted(" and also ") + " (the words and also, with a space on each side)",
                     " then ": quoted(" then ") + " (the word then, with a space on each side)"},
            ),
        ),
        code=(
            "def format_list(items):\n"
            "    if len(items) <= 1:\n"
            "        return \"\".join(items)\n"
            "    return <separator>.join(items[:-1]) + <last_joiner> + items[-1]"
        ),
        calls=('["apples", "pears", "plums"]', '["red", "green"]', '["solo"]', '[]', '["a", "b", "c", "d"]',
               '["milk", "eggs", "flour", "butter", "sugar"]', '["north", "south", "east", "west"]',
               '["tea", "coffee"]',
               '["Ann", "Bob", "Cy"]', '["one", "two", "three", "four", "five", "six"]', '["rain", "snow"]',
               '["x", "y", "z"]'),
    ),
    Template(
        name="make_slug",
        domain="text",
        params="title",
        requests=(
            (
                "My blog needs short web addresses made from post titles: lowercase words joined by my chosen"
                " character and cut to a maximum length."
            ),
            (
                "Please write a function that turns a title into a short lowercase slug for a URL, joining the words"
                " my way and keeping it under my length limit."
            ),
            (
                "I need a function that makes a URL slug from a title: all lowercase, words joined with a separator I"
                " picked, and not too long."
            ),
        ),
        hidden=(
            Param(
                "separator", ("_", ".", "+"), "-",
                "Join the words with {v}.", "Which character should join the words?",
                ("separator", "join", "between", "delimiter", "underscore", "dash", "hyphen", "space", "connect",
                 "character"),
                say={"_": "an underscore (" + quoted("_") + ")", ".": "a dot (" + quoted(".") + ")",
                     "+": "a plus sign (" + quoted("+") + ")"},
            ),
            Param(
                "max_length", (10, 12, 14, 16, 18, 20, 24, 28, 32), 30,
                "The slug is cut to at most {v} characters.", "What is the maximum length of a slug?",
                ("length", "long", "maximum", "max", "limit", "cut", "truncate", "short"),
            ),
        ),
        code=(
            "def make_slug(title):\n"
            "    words = title.lower().split()\n"
            "    return <separator>.join(words)[:<max_length>]"
        ),
        calls=('"My First Trip To Rome"', '"Baking Bread At Home For Beginners"', '"Hello World"',
               '"Ten Tips For Better Sleep Tonight"', '"A Very Long Title About Gardening In Small Spaces"',
               '"Weekly News"', '"How I Learned To Love Running Again"', '"Notes"',
               '"The Best Soup Recipes Of The Winter Season"', '"Quick Update On The Garden Project"',
               '"Summer Holiday Photos"', '"Why Cats Sleep So Much During The Day"'),
    ),
    Template(
        name="shorten",
        domain="text",
        params="text",
        requests=(
            (
                "On my website long captions must be cut short with a marker showing that text was removed; please"
                " write a function that does that."
            ),
            (
                "Please write a function that shortens a text that is too long for my app's preview, ending it with my"
                " marker."
            ),
            "I need long texts trimmed to my preview length, with a marker at the end when something was cut.",
        ),
        hidden=(
            Param(
                "limit", (15, 20, 25, 40, 50), 30,
                "Texts longer than {v} characters are cut to that length, trailing spaces removed.",
                "How long can a text be before it is cut?",
                ("length", "long", "maximum", "max", "character", "limit", "preview"),
            ),
            Param(
                "marker", ("..", " [...]", " >>", " (more)", "~"), "...",
                "A cut text ends with {v}.", "What marker goes at the end of a cut text?",
                ("marker", "end", "ellipsis", "dot", "suffix", "append", "symbol", "indicator"),
                say={"..": quoted("..") + " (two dots)",
                     " [...]": quoted(" [...]") + " (a space, then three dots in square brackets)",
                     " >>": quoted(" >>") + " (a space and two greater-than signs)",
                     " (more)": quoted(" (more)") + " (a space and the word more in round brackets)",
                     "~": quoted("~") + " (a tilde)"},
            ),
        ),
        code=(
            "def shorten(text):\n"
            "    if len(text) <= <limit>:\n"
            "        return text\n"
            "    return text[:<limit>].rstrip() + <marker>"
        ),
        calls=('"Short note"', '"Meeting moved to Friday"', '"The quick brown fox jumps over the lazy dog"',
               '"Sunny"', '"Please bring your own cup to the office party next week"', '"Fresh bread every morning"',
               '"A longer caption for a photo of the mountains at sunrise in spring"', '"Sale ends soon"',
               '"Our garden club meets on the first Monday of each month"', '"Closed for the holidays"',
               '"New recipes are posted every weekend, so check back often for more ideas"', '"Hello there, friend"'),
    ),
    Template(
        name="mask_number",
        domain="text",
        params="number",
        requests=(
            (
                "On receipts I print customers' card numbers mostly hidden; write a function that masks a number,"
                " keeping only its last few digits readable."
            ),
            (
                "Please write a function that hides most digits of my customers' account numbers with a masking"
                " character, leaving the end visible."
            ),
            (
                "I need a function that turns a number into masked text for my invoices, showing only a few digits at"
                " the end."
            ),
        ),
        hidden=(
            Param(
                "visible", (2, 3, 5, 6, 8), 4,
                "Only the last {v} digits stay visible.", "How many digits should stay visible at the end?",
                ("visible", "last", "digit", "unmasked", "reveal", "readable"),
            ),
            Param(
                "mask", ("#", "X", "x", "-", "="), "*",
                "Every hidden digit is replaced by {v}.", "Which character should hide the other digits?",
                ("mask", "character", "symbol", "hide", "hidden", "replace", "cover", "star", "asterisk", "masking"),
                say={"#": quoted("#") + " (a hash sign)", "X": quoted("X") + " (a capital X)",
                     "x": quoted("x") + " (a small x)",
                     "-": quoted("-") + " (a dash)", "=": quoted("=") + " (an equals sign)"},
            ),
        ),
        code=(
            "def mask_number(number):\n"
            "    text = str(number)\n"
            "    hidden = max(0, len(text) - <visible>)\n"
            "    return <mask> * hidden + text[hidden:]"
        ),
        calls=("5500123498761234", "12345", "987654321", "42", "3141592653", "1000200030004000", "77777777", "600613",
               "123", "9876543210987", "4417123456789113", "102030"),
        novel=True,
    ),
    Template(
        name="reading_minutes",
        domain="text",
        params="text",
        requests=(
            (
                "My blog shows an estimated reading time on each post; please write a function that gives it in whole"
                " minutes from the post's text, at my reading speed."
            ),
            (
                "I want a function that estimates how many whole minutes an article takes to read, from its word count"
                " and the reading speed I assume."
            ),
            (
                "Please write a function for the reading time of a text in whole minutes, using my words-per-minute"
                " figure and my rounding."
            ),
        ),
        hidden=(
            Param(
                "wpm", (150, 160, 170, 180, 190, 220, 230, 240, 250, 260, 275, 300, 320), 200,
                "I assume readers read {v} words per minute.",
                "What reading speed in words per minute should I assume?",
                ("speed", "word", "wpm", "fast", "pace", "rate"),
            ),
            Param(
                "rounding", ("up", "down"), "nearest",
                "{v}", "Should a partial minute be rounded up or down?",
                ("round", "whole", "fraction", "partial", "up", "down", "nearest"),
                code={"up": "math.ceil(minutes)", "down": "math.floor(minutes)", "nearest": "round(minutes)"},
                say={"up": "A partial minute always counts as a whole minute, so I round up.",
                     "down": "A partial minute is dropped, so I round down."},
            ),
        ),
        code=(
            "def reading_minutes(text):\n"
            "    import math\n"
            "    minutes = len(text.split()) / <wpm>\n"
            "    return <rounding>"
        ),
        calls=('"word " * 57', '"word " * 123', '"word " * 389', '"word " * 523', '"word " * 777', '"word " * 1042',
               '"word " * 1507', '"word " * 2222', '"word " * 95', '"word " * 310', '"word " * 641', '"word " * 1234',
               '"word " * 2801', '"word " * 4100'),
    ),
    # ------------------------------------------------------------------ time
    Template(
        name="format_duration",
        domain="time",
        params="minutes",
        requests=(
            (
                "My time-tracking sheet shows durations as hours and minutes in my own style; please write a function"
                " that formats a number of minutes that way, minutes always with two digits."
            ),
            (
                "I want a function that writes a duration given in minutes as hours and two-digit minutes, with the"
                " separator and ending I use."
            ),
            (
                "Please write a function that turns minutes into a short text of hours and minutes, the way my"
                " timesheets show it."
            ),
        ),
        hidden=(
            Param(
                "separator", ("h", ".", " h ", "-", "'"), ":",
                "Between the hours and the minutes I put {v}.", "What separates the hours from the minutes?",
                ("separator", "between", "separate", "colon", "divider", "delimiter"),
                say={"h": quoted("h") + " (a small h, no spaces)", ".": quoted(".") + " (a dot)",
                     " h ": quoted(" h ") + " (a small h with a space on each side)", "-": quoted("-") + " (a dash)",
                     "'": quoted("'") + " (an apostrophe)"},
            ),
            Param(
                "suffix", ("m", " min", "min", " mins", "'"), "",
                "After the minutes I write {v}.", "Does anything come after the minutes?",
                ("suffix", "end", "after", "unit", "label", "append", "trailing"),
                say={"m": quoted("m") + " (a small m, no space)", " min": quoted(" min") + " (a space and min)",
                     "min": quoted("min") + " (min, no space)", " mins": quoted(" mins") + " (a space and mins)",
                     "'": quoted("'") + " (an apostrophe)"},
            ),
        ),
        code=(
            "def format_duration(minutes):\n"
            "    hours = minutes // 60\n"
            "    return str(hours) + <separator> + str(minutes % 60).zfill(2) + <suffix>"
        ),
        calls=("0", "5", "59", "60", "61", "90", "125", "600", "1439", "245", "75", "3000"),
    ),
    Template(
        name="schedule_end",
        domain="time",
        params="start_hour, start_minute, meetings",
        requests=(
            (
                "I book back-to-back client meetings of a fixed length with a short gap between them; write a function"
                " that gives the time my last meeting ends, as hours and minutes with two digits each and a colon."
            ),
            (
                "Please write a function that tells me when a run of meetings finishes, from the start time and the"
                " number of meetings, with my usual meeting length and gaps, as two-digit hours, a colon and two-digit"
                " minutes."
            ),
            (
                "I need the end time of a series of my meetings, as hours colon minutes with two digits each, given"
                " when they start and how many there are."
            ),
        ),
        hidden=(
            Param(
                "meeting_minutes", (20, 25, 40, 45, 50), 30,
                "Each meeting lasts {v} minutes.", "How long does each meeting last?",
                ("length", "duration", "long", "last", "slot"),
            ),
            Param(
                "gap_minutes", (3, 5, 7, 15, 20), 10,
                "I leave {v} minutes between meetings.", "How long is the break between meetings?",
                ("gap", "break", "between", "pause", "buffer", "rest"),
            ),
        ),
        code=(
            "def schedule_end(start_hour, start_minute, meetings):\n"
            "    total = start_hour * 60 + start_minute + meetings * <meeting_minutes>\n"
            "    total = total + max(0, meetings - 1) * <gap_minutes>\n"
            "    return str(total // 60 % 24).zfill(2) + \":\" + str(total % 60).zfill(2)"
        ),
        calls=("9, 0, 1", "9, 0, 3", "13, 30, 2", "8, 15, 5", "10, 45, 4", "14, 0, 6", "11, 10, 1", "16, 20, 3",
               "7, 50, 8", "12, 5, 2", "23, 0, 3", "15, 35, 7"),
    ),
    Template(
        name="billable_minutes",
        domain="time",
        params="minutes",
        requests=(
            (
                "As a consultant I bill time in fixed blocks; please write a function that turns the minutes I worked"
                " into the minutes I bill."
            ),
            "I want a function that rounds worked minutes to my billing blocks, the way I always do it.",
            (
                "Please write a function for my timesheet that gives the billable minutes for the minutes worked, in"
                " whole blocks of my billing unit."
            ),
        ),
        hidden=(
            Param(
                "block", (3, 4, 5, 6, 8, 10, 12, 20, 25, 30, 45, 60, 90), 15,
                "I bill in blocks of {v} minutes.", "How big is a billing block?",
                ("block", "increment", "unit", "chunk", "step", "interval", "granularity", "big"),
            ),
            Param(
                "direction", ("up", "down"), "nearest",
                "{v}", "Should partial blocks be rounded up or down?",
                ("round", "up", "down", "direction", "nearest", "partial"),
                code={"up": "math.ceil", "down": "math.floor", "nearest": "round"},
                say={"up": "I always round up to a whole block.", "down": "I always round down to a whole block."},
            ),
        ),
        code=(
            "def billable_minutes(minutes):\n"
            "    import math\n"
            "    blocks = <direction>(minutes / <block>)\n"
            "    return blocks * <block>"
        ),
        calls=("7", "13", "22", "38", "47", "53", "71", "88", "101", "119", "134", "157", "203", "241", "299", "377"),
    ),
)
