"""The built-in task sets as package data: `<family>_<anything>.jsonl` files in the official task
format plus our `naive_solution`. colbench/families/builtin.py reads and stores them (their split rule
is written there)."""
