"""One training pass of the embedded model (SmolLM2-135M, full weights, CPU) beside a job that uses every core, with
GNU OpenMP's default spinning and with colbench's (GOMP_SPINCOUNT=1000, colbench/openmp.py), then both on idle
cores, measured in the same run: what the setting buys on shared cores and what it costs on idle ones.

The other job is a `colbench rollout` of the embedded model on backend-lite (CTranslate2, the sandboxed grader) at
the same priority, as a rollout beside a trainer, or two users' jobs on one machine, would be. Each pass runs in a
fresh process, since OpenMP reads the setting as it loads.

    .venv/bin/python benchmarks/shared_cores.py            # 1 row of 1,100 tokens, 2 passes of each kind
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

PASS = """
import sys, time, torch
from transformers import AutoModelForCausalLM
from colbench.model_refs import resolve_model
from colbench.training.modeling import TokenLogProbs
model = AutoModelForCausalLM.from_pretrained(resolve_model("smollm2").base, dtype=torch.float32).train()
tokens = int(sys.argv[1])
ids = torch.randint(0, 49000, (1, tokens))
target = torch.zeros_like(ids, dtype=torch.bool)
target[:, tokens // 2:] = True
started = time.perf_counter()
TokenLogProbs(model)(ids, torch.ones_like(ids), target).sum().backward()
print(time.perf_counter() - started)
"""

def one_pass(tokens: int, spins: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    if spins:
        env["GOMP_SPINCOUNT"] = spins
    # The pass imports torch before colbench, so without the variable OpenMP keeps its default spinning.
    done = subprocess.run([sys.executable, "-c", PASS, str(tokens)], env=env, capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1100)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    figures: dict[tuple[str, str], list[float]] = {}
    scratch = tempfile.TemporaryDirectory()
    busy = subprocess.Popen([sys.executable, "-m", "colbench.cli.app", "rollout", "--tasks",
                             "backend-lite:train", "--limit", "100", "-k", "4", "--sandbox", "bwrap"],
                            env=dict(os.environ, COLBENCH_DB=f"sqlite:///{scratch.name}/busy.db"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(40)  # its model loaded and its first dialogues under way
        for _ in range(args.repeats):
            for name, spins in (("default", None), ("colbench", "1000")):
                figures.setdefault(("shared", name), []).append(one_pass(args.tokens, spins))
    finally:
        busy.kill()
        busy.wait()
        scratch.cleanup()
    for _ in range(args.repeats):
        for name, spins in (("default", None), ("colbench", "1000")):
            figures.setdefault(("idle", name), []).append(one_pass(args.tokens, spins))
    print(f"one training pass, SmolLM2-135M, {args.tokens} tokens, {os.cpu_count()} cores; best of {args.repeats}")
    for cores in ("shared", "idle"):
        default, ours = min(figures[(cores, "default")]), min(figures[(cores, "colbench")])
        print(f"{cores:>6} cores: default spinning {default:6.1f} s, GOMP_SPINCOUNT=1000 {ours:6.1f} s"
              f" ({default / ours:.2f}x)")


if __name__ == "__main__":
    main()
