"""A plugin package for colbench, as a separate project would write one: a task family (the person holds a secret
word; the agent must ask for it and say it), an engine (a rule-following agent for it) and a policy algorithm.

Each is one module that registers itself; the package's entry points (its dist-info folder beside it, as pip writes
it on install) name the three modules. colbench finds them through importlib.metadata once this folder is on the
path: tests/test_plugins.py puts it there for the colbench processes it runs.
"""
