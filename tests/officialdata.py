"""Records in the official ColBench formats, made up by the tests (never downloaded)."""
from __future__ import annotations

SYSTEM = "<|im_start|>system\nYou are a helpful agent.<|im_end|>\n"


def backend_task(i: int) -> dict:
    name = f"shipping_cost_{i}"
    return {
        "problem_description": f"I need a function for my shop number {i} that works out shipping. "
        f"The signature of the function is: def {name}(weight, express)",
        "ground_truth": (
            f"def {name}(weight, express):\n    base = {i} + 2.5 * weight\n    return round(base * (1.5 if express"
            " else 1.0), 2)\n"
        ),
        "test_cases": {f"test{k}": f"{name}({k}, {k % 2 == 0})" for k in range(1, 11)},
        "hidden_information": (
            f"def {name}(weight, express):\n    base = {i} + 2.5 * weight\n    return round(base * (1.5 if express"
            " else 1.0), 2)\n"
        ),
    }


def frontend_task(i: int) -> dict:
    return {
        "problem_description": f"A landing page for bakery {i} with a hero section and a menu.",
        "ground_truth": f"<html><body class=\"bg-white\"><h1 class=\"text-3xl\">Bakery {i}</h1></body></html>",
    }


def _prompt(history: list[dict]) -> str:
    text = SYSTEM
    for message in history:
        text += f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n"
    return text + "<|im_start|>assistant\n"


def trajectory(task: dict, turns: int = 3, reward: float | None = 1.0) -> dict:
    history: list[dict] = [{"role": "user", "content": task["problem_description"]}]
    for t in range(turns):
        last = t == turns - 1
        content = "I WANT TO ANSWER:\n" + task["ground_truth"] if last else f"Question {t}: what unit is the weight in?"
        history.append({"role": "assistant", "content": content, "input": _prompt(history), "output": content})
        if not last:
            history.append({"role": "user", "content": f"Kilograms, answer {t}."})
    record = {"task": task, "dialogue_history": history, "answer": task["ground_truth"]}
    if reward is not None:
        record["reward"] = reward
    return record


def asked_then_answered(task: dict, question: str, reward: float) -> dict:
    """Two agent turns: a question (the learnable difference), then the same answer."""
    prompt = (
        "<|im_start|>system\nYou are a helpful agent.<|im_end|>\n<|im_start|>user\n"
        + task["problem_description"]
        + "<|im_end|>\n<|im_start|>assistant\n"
    )
    answer = "I WANT TO ANSWER:\n" + task["ground_truth"]
    second = prompt + question + "<|im_end|>\n<|im_start|>user\nYes, kilograms.<|im_end|>\n<|im_start|>assistant\n"
    history = [
        {"role": "user", "content": task["problem_description"]},
        {"role": "assistant", "content": question, "input": prompt, "output": question},
        {"role": "user", "content": "Yes, kilograms."},
        {"role": "assistant", "content": answer, "input": second, "output": answer},
    ]
    return {"task": task, "dialogue_history": history, "answer": task["ground_truth"], "reward": reward}
