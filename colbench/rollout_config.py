"""How a rollout runs: RolloutConfig, the settings of `colbench rollout` and of every rollout the
experiment makes. rollout.py runs it."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from colbench import protocol
from colbench.engines import AUTO as AUTO_ENGINE, ENGINES, engine_help
from colbench.families import selectors_help
from colbench.grading.sandboxes import AUTO as AUTO_SANDBOX, CHOICES as SANDBOX_CHOICES, sandbox_help
from colbench.grading.semantics import DEFAULT_GRADING, GRADING_HELP, GRADINGS
from colbench.model_refs import DEFAULT_MODEL, checkpoint_name
from colbench.openai_client import DEFAULT_TIMEOUT_S
from colbench.options import check, option
from colbench.runs import check_run_name
from colbench.simulators import simulator_help
from colbench.simulators.guard import DEFAULT_GUARD, GUARD_HELP, GUARDS

SERVED_CONCURRENCY = 256


@dataclass
class RolloutConfig:
    """How a rollout runs: the flags of `colbench rollout` (each field's help is its documentation)."""

    model: str = option(DEFAULT_MODEL, (
        f"Policy: '{DEFAULT_MODEL}' (embedded), a local folder, a hub id, ckpt:<id>, or a served model name with"
        " --engine openai."
    ))
    engine: str = option(AUTO_ENGINE, engine_help())
    ct2_compute_type: str = option("float32", (
        "ct2 engine's weights and arithmetic: float32 (the policy itself) or int8 (a slightly different model, stored"
        " as its own policy, ct2-int8:<model>; faster only where the CPU sums int8 in 32 bits: MKL on Intel, or"
        " VNNI. On an AVX2-only AMD CPU it is slower and coarser: docs/rollouts-and-engines.md, 'int8 by CPU')."
    ), choices=("float32", "int8"))
    base_url: str | None = option(None, "Server URL for --engine openai (default: $OPENAI_BASE_URL).")
    served_model: str | None = option(
        None,
        "--engine openai: the name the server serves the policy under (a model, or a LoRA adapter). Given, --model"
        " names the served weights (a folder, hub id or ckpt:<id>): their chat template renders each turn, which goes"
        " as token ids to /v1/completions, and the sampled ids and log-probs come back (vLLM), so the store keeps the"
        " exact prompts and ids every trainer reads, under --model's name, as --engine vllm would. Unset: --model is"
        " the served name, turns go to /v1/chat/completions, and neither the prompt nor token ids are stored (trainers"
        " would re-render and re-encode the text: fine for evaluation, approximate for training)."
    )
    simulator: str = option("builtin", simulator_help())
    sim_guard: str = option(DEFAULT_GUARD, GUARD_HELP, choices=GUARDS)
    tasks: str = option("backend:test", (
        f"Tasks: {selectors_help()} (backend-lite: the tier a small model can learn; built-in tasks are added on first"
        " use)."
    ))
    limit: int | None = option(None, "Only the first N tasks of the split (by id).", min=1)
    offset: int = option(0,
                         "Skip the first N tasks of the split (by id) before --limit applies: e.g. demonstrations on "
                         "--offset 200 and a validation rollout on --limit 200 never share a task.", min=0)
    samples_per_task: int = option(1, "Trajectories per task (k, for best-of-k and critic pairs).", min=1,
                                   flags=("--samples-per-task", "-k"))
    seed: int = option(0, "Base sampling seed.")
    temperature: float = option(protocol.TEMPERATURE,
                                "Sampling temperature (the protocol samples at 1.0, at evaluation too).", min=0.0)
    max_new_tokens: int = option(protocol.MAX_NEW_TOKENS, "Tokens per agent turn (the protocol's limit: 1024).", min=1)
    batch_size: int = option(
        16,
        f"Most agent turns in one generate call of a local engine ({', '.join(c.name for c in ENGINES if c.local)}).",
        min=1
    )
    concurrency: int | None = option(None, (
        "Episodes live at once, and the most requests in flight to each server (policy, simulator). Default: 256 with"
        " --engine openai, else 4 x --batch-size."
    ), min=1)
    request_timeout_s: float = option(
        DEFAULT_TIMEOUT_S,
        "Seconds a server request may take, queueing on the server included, before it is retried (openai engine,"
        " endpoint simulators). A busy server answers in minutes: a CPU vLLM at 256 requests in flight needs them.",
        min=0.1,
        flags=("--request-timeout",)
    )
    retries: int = option(
        3, "Retries of a failed server request (connection errors, timeouts, 429, 5xx; Retry-After honoured).", min=0
    )
    sandbox: str = option(AUTO_SANDBOX, sandbox_help(), choices=SANDBOX_CHOICES)
    grade_workers: int = option(2, "Sandboxed grading workers.", min=1)
    grading: str = option(DEFAULT_GRADING, "Backend grading semantics. " + GRADING_HELP, choices=GRADINGS)
    clip: str | None = option(
        None,
        "Frontend reward: CLIP ViT-B/32 weights (folder or hub id). Default: the weight-free ssim-edges similarity."
    )
    device: str = option("auto", "auto, cpu or cuda (local engines, and the critic of --rerank-critic).")
    rerank_critic: str | None = option(
        None,
        "Best-of-N: a critic checkpoint (ckpt:<id>) that picks the best of --candidates samples at every agent turn."
    )
    candidates: int = option(16, "Samples per agent turn for --rerank-critic.", min=2)
    stale_after_s: float = option(600.0,
                                  "Take over a running trajectory whose worker has been silent this long (seconds).",
                                  min=0.0)
    name: str | None = option(
        None,
        "Name this rollout run (unique in the store; no ':'), to find it again with `colbench runs show NAME` or"
        " `compare`. A rollout run is one policy, simulator, setting (temperature, tokens per turn, seed, best-of-N)"
        " and task set: a rerun of the same command, or one that differs only in --offset, --limit or -k, continues it"
        " under the name it has; another --name for it is refused."
    )
    tags: list[str] = option(
        [],
        "Tag the rollout run (repeat the flag: --tag baseline --tag lite); `colbench runs ls --tag` filters by it.",
        flags=("--tag",)
    )

    def __post_init__(self):
        check(self)
        check_run_name(self.name)
        if self.rerank_critic and self.rerank_critic.isdigit():
            self.rerank_critic = checkpoint_name(int(self.rerank_critic))
        if self.engine != AUTO_ENGINE and self.engine not in ENGINES:
            raise ValueError(f"--engine must be {AUTO_ENGINE}, {ENGINES.spellings()}; got {self.engine!r}")
        if self.concurrency is None:  # a server batches hundreds; a local engine needs its next batch ready
            self.concurrency = SERVED_CONCURRENCY if self.served else 4 * self.batch_size
        if self.served_model and not self.served:
            raise ValueError("--served-model goes with --engine openai (a served engine)")
        if self.served:
            self.base_url = self.base_url or os.environ.get("OPENAI_BASE_URL")
            if not self.base_url:
                raise ValueError(f"--engine {self.engine} needs --base-url (or $OPENAI_BASE_URL)")

    @property
    def served(self) -> bool:
        """The policy runs behind a server (--base-url), not in this process."""
        return self.engine != AUTO_ENGINE and ENGINES.get(self.engine).served

    @property
    def samples_per_turn(self) -> int:
        return self.candidates if self.rerank_critic else 1

    def setting(self) -> str:
        """What besides the policy and simulator shapes a trajectory; part of its slot's identity."""
        parts = []
        if self.temperature != protocol.TEMPERATURE:
            parts.append(f"t={self.temperature:g}")
        if self.max_new_tokens != protocol.MAX_NEW_TOKENS:
            parts.append(f"max={self.max_new_tokens}")
        if self.seed != 0:  # another seed draws other samples: other slots, not the ones already done
            parts.append(f"seed={self.seed}")
        if self.sim_guard in ("redact", "resample"):  # the agent reads other replies: other slots
            parts.append(f"guard={self.sim_guard}")
        if self.rerank_critic:  # last: its critic reference holds a ':'
            parts.append(f"best-of-{self.candidates}:{self.rerank_critic}")
        return ",".join(parts)

    def labels(self) -> dict:
        """The settings a run records: everything but its name and tags (which it keeps apart)."""
        return {k: v for k, v in asdict(self).items() if k not in ("name", "tags")}
