#!/usr/bin/env bash
# colbench's CUDA paths on tiny in-process models, no downloads: the hf engine, one bf16 critic
# step, one bf16 SWEET step, and FSDP2 over the visible GPUs. One PASS/FAIL/SKIP line per check,
# with its figures; exits 1 if any check FAILs. CI never runs it (no GPU there).
#
#   bash scripts/gpu_check.sh                   # on a CUDA machine, from the repository root
#   bash scripts/gpu_check.sh --device cpu      # the same checks on the CPU, to debug this script
#
# The tokenizer is SmolLM2's, converted by colbench from the embedded model, or the folder
# .gpu/smol-tokenizer when there is one (a GPU machine without the embedded model gets a copy).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

# A bare checkout (colbench not installed): link its folders into the layout setup.py installs
# (colbench.store from store/, colbench.cli from cli/, colbench.migrations from migrations/).
if ! "$python" -c "import colbench.store" 2>/dev/null; then
    shim=$(mktemp -d)
    mkdir "$shim/colbench"
    ln -s "$PWD"/colbench/* "$shim/colbench/"
    for folder in store cli migrations; do ln -s "$PWD/$folder" "$shim/colbench/$folder"; done
    export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
fi

exec "$python" scripts/gpu_check.py "$@"
