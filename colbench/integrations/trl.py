"""ColBench as an environment for TRL's ``GRPOTrainer`` (``environment_factory``).

    from trl import GRPOConfig, GRPOTrainer
    from colbench.integrations.trl import ColBenchTRL

    colbench = ColBenchTRL("backend-lite:train", group_size=4, record=True, policy="trl:my-run")
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=colbench.reward,
                          environment_factory=colbench.environment,
                          args=GRPOConfig(num_generations=4, max_steps=100, max_tool_calling_iterations=10))
    trainer.train()
    colbench.close()

TRL's multi-turn loop speaks in tool calls, so the dialogue is mapped onto one tool (docs/integrations.md):
- ``ask(message)``: one agent turn. The message is what the human reads, as a rollout's agent turn is read
  (text before ``OUTPUT:`` dropped; a message with ``I WANT TO ANSWER:`` is an answer and ends the
  dialogue); the tool returns the simulated human's reply, cut to the family's limit.
- a message with no tool call ends TRL's rollout, so it is the agent's last turn: read as the protocol
  reads the tenth (the text after the answer marker, else the whole text).
- the assistant's text beside a tool call is thinking the human never sees (as text before ``OUTPUT:``).
The reward is ``ColBench.grade``'s: the fraction of hidden tests passed in the sandbox under the official
grading, or the frontend page similarity. It is a reward function, not the environment's ``get_reward``,
because the last turn (the message with no tool call) reaches TRL's reward functions and never the
environment.

Tasks: the environment owns them. Without a ``train_dataset`` each ``reset()`` draws the next task, the
same one ``group_size`` times in a row (set it to ``num_generations``: a GRPO group is one task), and
returns it as the prompt. ``dataset()`` instead gives one row per task (system prompt, the human's
opening, its ``task_id``), which a multi-process run or a shuffled order needs.
"""
from __future__ import annotations

import asyncio
import threading

from colbench.integrations import require

require("trl", "TRL")
require("datasets", "TRL")

from colbench.integrations.core import ColBench, Dialogue  # noqa: E402 - after the refusal above

# What the policy is told besides the family's own instructions: how its messages reach the person.
TOOL_INSTRUCTIONS = (
    "\n\nYou talk with the person only through the `ask` tool: each call sends them one message and returns their "
    "reply. Your final answer is a message without a tool call that starts with `I WANT TO ANSWER:`."
)


class ColBenchTRL:
    """What a GRPO run on ColBench shares: colbench's parts (``core.ColBench``: tasks, grader, simulated human,
    store) and the order tasks are drawn in. ``options`` go to ``core.ColBench`` (simulator, db, limit, sandbox,
    grading, workers, clip, record, policy)."""

    def __init__(self, tasks: str = "backend-lite:train", *, group_size: int = 1, **options):
        options.setdefault("policy", "trl")
        self.bench = ColBench(tasks, **options)
        self.group_size = group_size
        self._draws = 0
        self._lock = threading.Lock()

    @property
    def system_prompt(self) -> str:
        return self.bench.system_prompt() + TOOL_INSTRUCTIONS

    def environment(self) -> "ColBenchEnvironment":
        """TRL's ``environment_factory``: one environment per rollout, all sharing this run's parts."""
        return ColBenchEnvironment(self)

    def dataset(self):
        """One row per task: ``prompt`` (the system prompt and the human's opening) and ``task_id``, which
        ``reset`` reads. For runs that route tasks through a dataset (several processes, shuffling)."""
        from datasets import Dataset

        rows = [{"prompt": [{"role": "system", "content": self.system_prompt},
                            {"role": "user", "content": self.bench.tasks[task_id].problem_description}],
                 "task_id": task_id} for task_id in self.bench.task_ids]
        return Dataset.from_list(rows)

    def reward(self, completions, environments=None, trainer_state=None, **unused) -> list[float]:
        """TRL's reward function: each rollout's last message ends its dialogue, and colbench grades them all."""
        if environments is None:
            raise ValueError("the ColBench reward reads TRL's environments: pass"
                             " environment_factory=colbench.environment")
        dialogues = []
        for completion, environment in zip(completions, environments):
            environment._dialogue.final_turn(_last_plain_message(completion))
            dialogues.append(environment._dialogue)
        setting = f"step={trainer_state.global_step}" if trainer_state is not None else ""
        return [grade.reward for grade in self.bench.grade(dialogues, setting)]

    def close(self) -> None:
        self.bench.close()

    def _next_task(self) -> int:
        with self._lock:
            draw, self._draws = self._draws, self._draws + 1
        ids = self.bench.task_ids
        return ids[(draw // self.group_size) % len(ids)]


class ColBenchEnvironment:
    """One rollout's dialogue. TRL exposes every public method but ``reset`` as a tool: only ``ask`` is public."""

    def __init__(self, owner: ColBenchTRL):
        self._owner = owner
        self._dialogue: Dialogue | None = None

    def reset(self, task_id: int | None = None, **row) -> str | None:
        """Start a dialogue: on the row's task (``dataset()``), else on the next task the run draws, whose
        instructions and opening message are then returned for TRL to put in the (empty) prompt."""
        if task_id is not None:
            self._dialogue = self._owner.bench.dialogue(int(task_id))
            return None
        self._dialogue = self._owner.bench.dialogue(self._owner._next_task())
        return f"{self._owner.system_prompt}\n\n{self._dialogue.task.problem_description}"

    async def ask(self, message: str) -> str:
        """Send one message to the person you are working for and get their reply.

        Args:
            message: What you say to the person: a question, or the work so far.

        Returns:
            The person's reply.
        """
        dialogue = self._dialogue
        if dialogue.finished:
            return "The conversation is over: your answer has been taken."
        # In a thread: the simulated human may be a model behind a server, and TRL runs the rollouts' calls together.
        reply = await asyncio.to_thread(dialogue.agent_turn, message)
        return reply if reply is not None else "The conversation is over: your answer has been taken."


def _last_plain_message(completion) -> str | None:
    """The text of a completion's last message when it is the assistant's and calls no tool; else None."""
    if isinstance(completion, str):  # a plain-text (not conversational) prompt
        return completion
    if not completion:
        return None
    last = completion[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    content = last.get("content")
    if isinstance(content, list):  # multimodal blocks
        content = "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content or ""


__all__ = ["ColBenchEnvironment", "ColBenchTRL", "TOOL_INSTRUCTIONS"]
