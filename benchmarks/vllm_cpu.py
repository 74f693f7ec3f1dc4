"""vLLM's CPU build against the local engines (ct2, hf) on this machine's cores, in one run.

1. Engines: generated tokens/s on the same backend prompts (benchmarks/rollout.py's), at temperature 1,
   ``--max-new-tokens`` each, with 1 and 16 dialogues at once: hf and ct2 batch them in one process
   (``max_batch_size`` = the count), vLLM gets them as concurrent requests from `--engine openai` (token ids in, ids
   and log-probs out, as rollouts send them) and batches them itself. Each local engine runs in a child process of its
   own (torch's OpenMP threads, once started, slow an engine after them); the server is started once, by colbench's
   own VLLMServer, with `colbench serve`'s flags. Resident memory: a local engine's child's peak; the server's
   processes' (API server, engine core, worker) sum after the run.
2. Rollout (unless ``--no-rollout``): the wall time of `colbench rollout` of ``--tasks`` backend-lite tasks through
   each engine (the built-in simulated human, the bwrap sandbox, the store), ``--engine openai`` against the same
   server.

    python benchmarks/vllm_cpu.py [--max-new-tokens 128] [--tasks 8] [--no-rollout] [--engines hf,ct2,vllm]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rollout import benchmark_conversations  # noqa: E402  (the same prompts as the local engines' benchmark)

COUNTS = (1, 16)


def local_child(kind: str, count: int, max_new_tokens: int) -> dict:
    """In a child process: ``count`` conversations through a local engine, one batch, after a warm-up."""
    from colbench.engines import SamplingParams, make_engine

    engine = make_engine(kind, "smollm2", device="cpu", max_batch_size=count)
    conversations = benchmark_conversations(count)
    engine.generate(conversations[:1], SamplingParams(temperature=1.0, max_new_tokens=8, seed=0))
    started = time.perf_counter()
    generations = engine.generate(conversations, SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens, seed=1))
    seconds = time.perf_counter() - started
    tokens = sum(s.num_tokens for g in generations for s in g.samples)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"tokens": tokens, "seconds": seconds, "resident_mib": peak_mib}


def served(base_url: str, count: int, max_new_tokens: int) -> dict:
    from colbench.engines import SamplingParams
    from colbench.engines.openai import OpenAIEngine
    from colbench.model_refs import load_tokenizer, resolve_model

    tokenizer = load_tokenizer(resolve_model("smollm2"))
    engine = OpenAIEngine("smollm2", base_url, tokenizer=tokenizer, timeout_s=600)
    conversations = benchmark_conversations(count)
    engine.generate(conversations[:1], SamplingParams(temperature=1.0, max_new_tokens=8, seed=0))
    params = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens)
    started = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:  # one request per dialogue, all in flight: how a rollout sends them
        generations = list(pool.map(lambda pair: engine.generate([pair[1]], SamplingParams(
            params.temperature, params.max_new_tokens, seed=pair[0]))[0], enumerate(conversations)))
    seconds = time.perf_counter() - started
    engine.close()
    return {"tokens": sum(s.num_tokens for g in generations for s in g.samples), "seconds": seconds}


def group_rss_mib(pid: int) -> float:
    """Resident memory of every process in ``pid``'s process group, MiB."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pid:
                continue
            fields = (entry / "status").read_text().split("VmRSS:")[1].split()
            total += int(fields[0])
        except (OSError, IndexError, ProcessLookupError):
            continue
    return total / 1024


def rollout_seconds(engine_args: list[str], tasks: int, max_new_tokens: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "colbench.cli.app", "--db", f"sqlite:///{folder}/b.db", "rollout",
                        *engine_args, "--tasks", "backend-lite:train", "--limit", str(tasks), "--max-new-tokens",
                        str(max_new_tokens), "--json"], check=True, capture_output=True, text=True)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--tasks", type=int, default=8, help="backend-lite tasks in each engine's rollout")
    parser.add_argument("--no-rollout", action="store_true")
    parser.add_argument("--engines", default="hf,ct2,vllm")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, count = args.child.split(":")
        print(json.dumps(local_child(kind, int(count), args.max_new_tokens)))
        return
    from colbench.engines.vllm_server import ServerSpec, VLLMServer, find_vllm, free_port
    from colbench.model_cache import embedded_model_dir

    engines = args.engines.split(",")
    rows = []
    server = None
    if "vllm" in engines:
        install = find_vllm()
        server = VLLMServer(ServerSpec(model=str(embedded_model_dir()), served_name="smollm2", port=free_port()),
                            install)
        server.start()
        print(f"{install.describe()}: ready in {server.wait_ready():.0f} s", file=sys.stderr)
    try:
        for count in COUNTS:
            for kind in engines:
                if kind == "vllm":
                    figures = served(server.base_url, count, args.max_new_tokens)
                    figures["resident_mib"] = group_rss_mib(server.process.pid)
                else:
                    done = subprocess.run([sys.executable, __file__, "--child", f"{kind}:{count}", "--max-new-tokens",
                                           str(args.max_new_tokens)], check=True, capture_output=True, text=True)
                    figures = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append({"engine": kind, "dialogues": count, "tokens_per_s": figures["tokens"] / figures["seconds"],
                             **figures})
                print(json.dumps(rows[-1]), file=sys.stderr)
        rollouts = {}
        if not args.no_rollout:
            for kind in engines:
                engine_args = (["--engine", "openai", "--base-url", server.base_url, "--served-model", "smollm2",
                                "--model", "smollm2"] if kind == "vllm" else ["--engine", kind])
                rollouts[kind] = rollout_seconds(engine_args, args.tasks, args.max_new_tokens)
                print(f"rollout {kind}: {rollouts[kind]:.0f} s", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    base = {r["dialogues"]: r["tokens_per_s"] for r in rows if r["engine"] == "ct2"}
    print("| engine | dialogues at once | tokens/s | vs ct2 | resident MiB |\n|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['tokens_per_s'] / base[r['dialogues']]:.2f}x" if r["dialogues"] in base else "-"
        print(f"| {r['engine']} | {r['dialogues']} | {r['tokens_per_s']:.1f} | {ratio} | {r['resident_mib']:.0f} |")
    if rollouts:
        print(f"\n| engine | rollout of {args.tasks} backend-lite tasks, s | speed-up over ct2 |\n|---|---|---|")
        for kind, seconds in rollouts.items():
            ratio = f"{rollouts['ct2'] / seconds:.2f}x" if "ct2" in rollouts else "-"
            print(f"| {kind} | {seconds:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
