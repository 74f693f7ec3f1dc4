"""The built-in simulated humans: deterministic, rule-based stand-ins for CPU runs and CI.

``backend.py`` answers from the reference code's syntax tree (``facts.py`` reads the facts,
``english.py`` phrases them); ``frontend.py`` compares the two rendered pages' DOM. They
never write code or HTML. Numbers measured with them are not comparable to the paper's.
"""
