"""colbench.integrations.trl: two real GRPOTrainer steps on a tiny model on the CPU, against backend-lite with the
built-in simulated human and the bwrap sandbox, every dialogue recorded into a store.

A random tiny model would only ever earn 0, which a broken reward would earn too; so the model first memorises one
whole good dialogue on task 1 (a tool call asking the two hidden details, the human's reply, the right function).
Sampled by TRL, it calls ``ask``, reads colbench's simulated human, answers, and is graded in the sandbox: the test
then holds TRL's logged reward to colbench's own grading of the recorded dialogues.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("trl")

QUESTION = "What sales tax rate should I apply? How should I round the total?"


def tool_template_tokenizer(smol_tokenizer_dir):
    """The real SmolLM2 tokenizer under a chat template TRL can parse tool calls of (ChatML, as SmolLM2's own)."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = AutoTokenizer.from_pretrained(smol_tokenizer_dir)
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def memorised_model(tokenizer, prompt: str, completion: str):
    """A tiny Llama that has learned ``completion`` after ``prompt`` by heart: Adam on that one sequence, the loss
    (and the 49k-wide output layer, the costly part on a CPU) on the completion's tokens only."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    tail = tokenizer(completion, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([head + tail])
    targets = ids[0, len(head):]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(150):
        hidden = model.model(input_ids=ids).last_hidden_state[0, len(head) - 1:-1]
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.05:
            break
    assert loss.item() < 0.1, f"the tiny model did not learn its dialogue (loss {loss.item():.3f})"
    return model


def test_two_grpo_steps_reward_what_colbench_grades(smol_tokenizer_dir, bwrap, tmp_path, monkeypatch):
    from trl import GRPOConfig, GRPOTrainer

    from colbench.integrations.trl import ColBenchTRL
    from colbench.store import queries
    from colbench.store.db import Database
    from colbench.tasks.rows import spec_of
    from colbench.wiring import build_env

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    db_url = f"sqlite:///{tmp_path / 'trl.db'}"
    colbench = ColBenchTRL("backend-lite:train", group_size=2, db=db_url, limit=2, sandbox=bwrap, record=True,
                           policy="trl:tiny")
    first = colbench.bench.tasks[colbench.bench.task_ids[0]]
    tokenizer = tool_template_tokenizer(smol_tokenizer_dir)

    # The answer to memorise, after the prompt exactly as TRL renders the environment-owned one with its tool.
    probe = colbench.environment()
    prompt = [{"role": "user", "content": probe.reset()}]
    colbench._draws = 0  # the probe drew task 1: the trainer starts from the first draw again
    answer = "I WANT TO ANSWER:\n" + first.ground_truth.strip()
    opening = tokenizer.apply_chat_template(prompt, tools=[probe.ask], tokenize=False, add_generation_prompt=True)
    model = memorised_model(tokenizer, opening, answer + "<|im_end|>")

    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=64, max_tool_calling_iterations=10, learning_rate=1e-5,
                      temperature=0.3,  # the memorised answer, sampled on any CPU's arithmetic
                      logging_steps=1, report_to="none", save_strategy="no", use_cpu=True, bf16=False,
                      seed=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=colbench.reward,
                          environment_factory=colbench.environment, args=args)
    trainer.train()
    colbench.close()

    logged = [entry["rewards/reward/mean"] for entry in trainer.state.log_history if "rewards/reward/mean" in entry]
    assert len(logged) == 2

    # What was recorded: 4 dialogues a step, in groups of 2 on one task (task 1, then task 2).
    db = Database(db_url)
    with db.read() as session:
        rows = [(t, task) for t, task, _ in queries.find_trajectories(session, queries.TrajectoryFilter())]
        turns = {t.id: queries.turns_of(session, t.id) for t, _ in rows}
    rows.sort(key=lambda pair: pair[0].id)
    assert [t.setting for t, _ in rows] == ["step=0"] * 4 + ["step=1"] * 4
    assert [task.id for _, task in rows] == [colbench.bench.task_ids[i] for i in (0, 0, 1, 1) * 2]

    # TRL's reward for each step is colbench's grade of that step's dialogues, and they are graded again here
    # through colbench's own path (a fresh environment's sandbox, the stored answer) to the same figure.
    env, close = build_env(db, "backend", sandbox=bwrap)
    try:
        regraded = [env.grade(spec_of(task), t.answer or "").result().reward for t, task in rows]
    finally:
        close()
    stored = [t.reward for t, _ in rows]
    assert regraded == pytest.approx(stored)
    assert logged == pytest.approx([sum(stored[:4]) / 4, sum(stored[4:]) / 4])

    # The memorised answer was graded in the sandbox: it passed every test, read as a rollout reads it (the text after
    # the marker); the other task's dialogues, on the same weights, did not.
    solved = [t for t, _ in rows if t.success]
    assert solved and all(task.id == colbench.bench.task_ids[0] for t, task in rows if t.success)
    assert solved[0].answer == "\n" + first.ground_truth.strip()
    assert [(turn.role, turn.content) for turn in turns[solved[0].id]][1:] == [("assistant", answer)]


def test_the_ask_tool_is_one_turn_of_the_dialogue(bwrap, tmp_path):
    """``ask`` is an agent turn the built-in human answers; the message without a tool call is the last turn."""
    import asyncio

    from colbench.integrations.trl import ColBenchTRL

    colbench = ColBenchTRL("backend-lite:train", db=f"sqlite:///{tmp_path / 'ask.db'}", limit=1, sandbox=bwrap)
    try:
        environment = colbench.environment()
        assert environment.reset(task_id=colbench.bench.task_ids[0]) is None
        task = colbench.bench.tasks[colbench.bench.task_ids[0]]
        reply = asyncio.run(environment.ask("thinking it over OUTPUT: " + QUESTION))
        assert reply == "The sales tax rate is 5 percent. I round the total to one decimal place."
        final = [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "ask", "arguments": {"message": QUESTION}}}]}, {"role": "tool", "content": reply},
            {"role": "assistant", "content": "Here it is. I WANT TO ANSWER:\n" + task.ground_truth}]
        assert colbench.reward([final], environments=[environment]) == [1.0]
        turns = environment._dialogue.turns
        assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
        assert turns[1]["content"] == " " + QUESTION  # the text before OUTPUT: never reaches the human
        # A rollout that ends on a tool call gave no answer: graded as the empty answer.
        environment.reset(task_id=colbench.bench.task_ids[0])
        assert colbench.reward([final[:1]], environments=[environment]) == [0.0]
    finally:
        colbench.close()


def test_without_trl_the_integration_is_refused_in_one_line():
    code = ("import sys; sys.modules['trl'] = None\n"
            "from colbench.integrations import MissingIntegration\n"
            "try:\n    import colbench.integrations.trl\n"
            "except MissingIntegration as err:\n    print(str(err))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 1 and "TRL" in lines[0] and "pip install 'colbench[integrations]'" in lines[0]
