"""Making tasks: `colbench tasks generate` writes new ones with an LLM, `colbench tasks validate`
checks any (new, built-in or lite) in the sandbox before they are used.

Kept apart from colbench.tasks (the task data and its TaskSpec), which the engines, the
grader and the file formats import: this package uses those, so it sits above them.
"""
