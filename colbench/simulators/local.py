"""A simulated human played by a model loaded in this process, through any Engine.

Same instructions and messages as the endpoint simulator; greedy decoding
(temperature 0), as the paper's simulator. Handy when the simulator model fits
beside the policy, or on a single machine without a server.
"""
from __future__ import annotations

import time

from colbench.engines.base import Engine, SamplingParams
from colbench.simulators.base import SimReply, SimRequest, Simulator, no_model_for
from colbench.simulators.prompts import clean_reply


class LocalModelSimulator(Simulator):
    def __init__(self, engine: Engine, *, max_new_tokens: int = 256, owns_engine: bool = False):
        """``owns_engine``: close the engine with the simulator (set when we built it)."""
        self.engine = engine
        self.ref = f"local:{engine.model_ref}"
        self.max_new_tokens = max_new_tokens
        self.owns_engine = owns_engine

    def reply(self, requests: list[SimRequest]) -> list[SimReply]:
        replies: list[SimReply | None] = [None] * len(requests)
        batch = []
        for i, request in enumerate(requests):
            problem = no_model_for(request, "text")  # a text model, in this process
            if problem:
                replies[i] = SimReply(text="", error=problem)
            else:
                batch.append(i)
        if batch:
            start = time.monotonic()
            params = SamplingParams(temperature=0.0, max_new_tokens=self.max_new_tokens, n=1)
            try:
                generations = self.engine.generate([requests[i].messages() for i in batch], params)
                if len(generations) != len(batch):
                    raise RuntimeError(f"engine gave {len(generations)} generations for {len(batch)} requests")
                texts = [clean_reply(g.samples[0].text) if g.samples else "" for g in generations]
                errors = [None if t else "the simulator model produced an empty reply" for t in texts]
            except Exception as exc:  # noqa: BLE001 - a simulator failure must never crash the run
                message = (" ".join(str(exc).split()) or type(exc).__name__)[:300]
                texts, errors = [""] * len(batch), [message] * len(batch)
            # One batched call: each reply carries the batch's wall time.
            elapsed = time.monotonic() - start
            for i, text, error in zip(batch, texts, errors):
                replies[i] = SimReply(text=text, error=error, latency_s=elapsed)
        return replies  # type: ignore[return-value]

    def close(self) -> None:
        if self.owns_engine:
            self.engine.close()
