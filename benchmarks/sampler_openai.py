"""SWEET's served sampler (--sampler openai) against the loopback OpenAI-compatible server: candidates
per second through ``OpenAIEngine.generate_from_prompts``, and two baselines measured in the same run on
the same server and prompts:

- ``raw``: the same requests (token-id prompts to /v1/completions, n candidates each) sent with the
  OpenAI SDK alone, on the same number of threads, with nothing parsed: what the engine's own work
  (encoding the prompt, reading ids and log-probs back, decoding the text) costs on top of HTTP;
- ``sequential``: the engine with one request in flight, as a client that waits for each turn.

The server (tests/plugins/openai_server.py) answers each request after ``--delay`` seconds, standing in
for a model's time to sample n candidates, with ``--tokens`` token ids per candidate and their
log-probs, in vLLM's format. It runs in a process of its own, as a real one would (its threads do not
take the client's GIL), but on the same cores. ``ideal`` is turns x delay / concurrency: the wall time if only the
server's
delay counted.

    .venv/bin/python benchmarks/sampler_openai.py                 # 256 turns x 16 candidates, 50 ms each
    .venv/bin/python benchmarks/sampler_openai.py --delay 0       # the client's own cost per request
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from plugins.openai_server import FakeOpenAIServer, token_logprob  # noqa: E402  (the tests' loopback server)

from colbench.engines.base import SamplingParams  # noqa: E402
from colbench.engines.openai import OpenAIEngine  # noqa: E402


def sampler(tokens: int, eos: int):
    def sample(request):  # n candidates of ``tokens`` ids each, ending at EOS
        ids = [(sum(request["prompt"]) + 31 * k) % 40000 + 100 for k in range(tokens - 1)] + [eos]
        return [{"token_ids": ids, "logprobs": [token_logprob(str(t)) for t in ids], "finish_reason": "stop"}
                for _ in range(request["n"])]
    return sample


def serve(tokens: int, eos: int, delay: float) -> None:
    """The server's own process: prints its address, answers until stdin closes."""
    server = FakeOpenAIServer().start()
    server.set_completion_responder(sampler(tokens, eos))
    server.set_delay(lambda request: delay)
    print(server.base_url, flush=True)
    sys.stdin.read()
    server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=256,
                        help="stored turns to sample candidates for (one request each)")
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64, help="token ids per candidate")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the server process (its EOS id)
    args = parser.parse_args()
    if args.serve is not None:
        return serve(args.tokens, args.serve, args.delay)

    from transformers import AutoTokenizer

    from colbench.model_cache import embedded_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_tokenizer_dir())  # SmolLM2's
    prompts = [
        f"<|im_start|>user\nTurn {i}: what unit is the weight in, and how is shipping"
        " priced?<|im_end|>\n<|im_start|>assistant\n"
        for i in range(args.turns)
    ]
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(tokenizer.eos_token_id), "--tokens",
                                str(args.tokens),
                                "--delay", str(args.delay)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = process.stdout.readline().strip()
    model = "test-model"
    params = SamplingParams(temperature=1.0, max_new_tokens=args.tokens, n=args.candidates, seed=0)
    candidates = args.turns * args.candidates
    try:
        figures = {}
        with OpenAIEngine(model, base_url, tokenizer=tokenizer, concurrency=args.concurrency) as engine:
            engine.generate_from_prompts(prompts[:4], params)  # connections and imports warm
            started = time.perf_counter()
            generations = engine.generate_from_prompts(prompts, params)
            figures["engine"] = time.perf_counter() - started
            assert sum(len(g.samples) for g in generations) == candidates
            assert all(len(s.token_ids) == args.tokens == len(s.token_logprobs) for g in generations for s in g.samples)

            import openai

            client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
            ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]

            def raw(prompt_ids):
                return client.completions.create(model=model, prompt=prompt_ids, n=args.candidates,
                                                 max_tokens=args.tokens,
                                                 temperature=1.0, seed=0, logprobs=1,
                                                 extra_body={"return_token_ids": True,
                                                             "return_tokens_as_token_ids": True})

            with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
                list(pool.map(raw, ids[:4]))
                started = time.perf_counter()
                list(pool.map(raw, ids))
                figures["raw"] = time.perf_counter() - started
            client.close()
        turns = max(1, args.turns // 8)  # the sequential baseline on an eighth of the turns, scaled
        with OpenAIEngine(model, base_url, tokenizer=tokenizer, concurrency=1) as engine:
            started = time.perf_counter()
            engine.generate_from_prompts(prompts[:turns], params)
            figures["sequential"] = (time.perf_counter() - started) * args.turns / turns
    finally:
        process.stdin.close()
        process.wait(timeout=30)

    ideal = args.turns * args.delay / args.concurrency
    print(
        f"{args.turns} turns x {args.candidates} candidates x {args.tokens} tokens, server delay"
        f" {args.delay * 1000:g} ms, concurrency {args.concurrency}"
    )
    for name in ("engine", "raw", "sequential"):
        print(f"  {name:<10} {figures[name]:7.2f} s  {candidates / figures[name]:9.0f} candidates/s  "
              f"{candidates * args.tokens / figures[name]:10.0f} tokens/s")
    print(f"  ideal      {ideal:7.2f} s  (turns x delay / concurrency)")
    print(
        f"engine / raw SDK throughput: {figures['raw'] / figures['engine']:.2f}   engine / sequential:"
        f" {figures['sequential'] / figures['engine']:.1f}x   wall / ideal: {figures['engine'] / ideal:.2f}"
        if ideal > 0
        else (
            f"engine / raw SDK throughput: {figures['raw'] / figures['engine']:.2f}   "
            f"engine / sequential: {figures['sequential'] / figures['engine']:.1f}x"
        )
    )


if __name__ == "__main__":
    main()
