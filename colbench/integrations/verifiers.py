"""ColBench as a verifiers multi-turn environment (``vf.MultiTurnEnv``), for verifiers' evaluation and prime-rl.

    from colbench.integrations.verifiers import ColBenchEnv
    from verifiers.types import ClientConfig

    env = ColBenchEnv("backend-lite:train", simulator="builtin", record=True, policy="vf:my-model")
    results = env.evaluate_sync(ClientConfig(api_base_url="http://127.0.0.1:8000/v1"), model="my-model",
                                num_examples=10, rollouts_per_example=4)
    env.close()

A verifiers dialogue is plain chat, so the protocol is kept as ``colbench rollout`` keeps it, with no tool: each
assistant message is one agent turn, read through the family's episode (the text before ``OUTPUT:`` dropped, the
answer marker ends the dialogue, the tenth turn ends it whatever it says); the environment's reply is colbench's
simulated human, cut to the family's limit; the reward (the rubric's one function, weight 1) is colbench's grade
of the finished dialogue (hidden tests in the sandbox under the official grading, or the page similarity).
"""
from __future__ import annotations

import asyncio

from colbench import protocol
from colbench.integrations import require

require("verifiers", "verifiers")
require("datasets", "verifiers")

import verifiers as vf  # noqa: E402 - after the refusal above
from datasets import Dataset  # noqa: E402

from colbench.integrations.core import ColBench, Dialogue  # noqa: E402


class ColBenchEnv(vf.MultiTurnEnv):
    """ColBench tasks as a verifiers environment: one dataset row per task (the agent's instructions as the system
    message, the human's opening as the user's, the task's id in ``info``). ``options`` go to ``core.ColBench``
    (simulator, db, limit, offset, sandbox, grading, workers, clip, record, policy)."""

    def __init__(self, tasks: str = "backend-lite:train", **options):
        options.setdefault("policy", "verifiers")
        self.bench = ColBench(tasks, **options)
        system = self.bench.system_prompt()
        rows = [{"prompt": [{"role": "system", "content": system},
                            {"role": "user", "content": self.bench.tasks[task_id].problem_description}],
                 "answer": "", "info": {"task_id": task_id}} for task_id in self.bench.task_ids]
        dataset = Dataset.from_list(rows)
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=vf.Rubric(funcs=[self.colbench_reward]),
                         max_turns=protocol.MAX_AGENT_TURNS)

    async def setup_state(self, state, **kwargs):
        state["colbench"] = self.bench.dialogue(int(state["info"]["task_id"]))
        return state

    async def add_model_response(self, state, prompt_messages, response):
        """Each model response is an agent turn: the human answers it here (in a thread: the simulator may be a
        model behind a server), so the stop condition below sees at once whether it ended the dialogue."""
        await super().add_model_response(state, prompt_messages, response)
        dialogue: Dialogue = state["colbench"]
        text = _text(state["trajectory"][-1]["completion"])
        state["colbench_reply"] = await asyncio.to_thread(dialogue.agent_turn, text)

    @vf.stop
    async def dialogue_over(self, state) -> bool:
        """The agent answered, or took its last allowed turn (colbench.protocol)."""
        return state["colbench"].finished

    async def env_response(self, messages, state, **kwargs):
        return [vf.UserMessage(content=state.pop("colbench_reply"))]

    async def colbench_reward(self, state) -> float:
        """colbench's grade of the finished dialogue (one that verifiers cut short, by an error or a length limit,
        is graded as it stands: the empty answer, or the last page shown)."""
        dialogue: Dialogue = state["colbench"]
        dialogue.final_turn(None)
        (grade,) = await asyncio.to_thread(self.bench.grade, [dialogue])
        return grade.reward

    def close(self) -> None:
        self.bench.close()


def _text(messages) -> str:
    """The text of a model response's last message (pydantic messages or dicts; content a string or parts)."""
    if not messages:
        return ""
    last = messages[-1]
    content = last.get("content") if isinstance(last, dict) else getattr(last, "content", None)
    if isinstance(content, list):
        content = "".join(part.get("text", "") if isinstance(part, dict) else getattr(part, "text", "") or ""
                          for part in content)
    return content or ""


def load_environment(tasks: str = "backend-lite:train", **options) -> ColBenchEnv:
    """verifiers' entry point for an environment module (``vf.load_environment``)."""
    return ColBenchEnv(tasks, **options)


__all__ = ["ColBenchEnv", "load_environment"]
