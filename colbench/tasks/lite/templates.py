"""Every backend-lite template (they live in templates_<domain>.py), and the openers of descriptions.

Template names are unique and are the names of their functions. Order matters: it fixes
which opener each instance gets, so append new templates at the end of a module or add a
module at the end of TEMPLATES rather than reordering.
"""
from __future__ import annotations

from colbench.tasks.lite.schema import Template
from colbench.tasks.lite.templates_life import TEMPLATES as LIFE
from colbench.tasks.lite.templates_money import TEMPLATES as MONEY
from colbench.tasks.lite.templates_play import TEMPLATES as PLAY
from colbench.tasks.lite.templates_text import TEMPLATES as TEXT

TEMPLATES: tuple[Template, ...] = (*MONEY, *LIFE, *TEXT, *PLAY)
BY_NAME: dict[str, Template] = {template.name: template for template in TEMPLATES}
assert len(BY_NAME) == len(TEMPLATES), "template names must be unique"

# A first sentence for descriptions, so that the instances of a template read differently.
# No digits and nothing about any hidden detail.
OPENERS = (
    "Hi!",
    "Hello there.",
    "Quick favour, please.",
    "I could use a hand with some code.",
    "I'm not much of a programmer.",
    "Here's a small job for you.",
    "I hope you can help me.",
    "Thanks in advance for your help.",
    "I have a little coding request.",
    "Good morning.",
    "I'd love a small Python helper.",
    "Let me explain what I need.",
)
# Openers of a template's instances beyond the len(OPENERS) x len(requests) that OPENERS gives distinct descriptions
# (the fresh2 split's): a new list, so that no earlier instance's description changes.
LATER_OPENERS = (
    "Hey, I need something small.",
    "Could you write this for me?",
    "Hello, I'm after a little function.",
    "Here's what I'm trying to do.",
    "I wonder if you could help.",
    "Something I keep doing by hand:",
    "Afternoon!",
    "I've a simple one for you.",
    "Could I ask for a bit of code?",
    "Here's my situation.",
    "A small request, if you have a moment.",
    "I'm hoping you can save me some time.",
)
