"""Training rows hold exactly what the policy read and sampled (sequences.py), on the real
SmolLM2 tokenizer: stored prompt ids, sampled ids, rows that merge only where the ids
agree, and one context cap shared by training and scoring."""
from __future__ import annotations

from types import SimpleNamespace


from colbench.training import sequences as S

DIALOGUE = [
    {"role": "user", "content": "Write a function that adds two numbers."},
    {"role": "assistant", "content": "Should it accept floats?"},
    {"role": "user", "content": "Yes, floats too."},
    {"role": "assistant", "content": "I WANT TO ANSWER:\ndef add(a, b):\n    return a + b"},
]


def stored_turns(tokenizer, dialogue, sampled=None):
    """Turn rows as a rollout stores them: each agent turn's exact prompt and its sampled ids
    (``sampled[k]``, or the canonical ids of its text) closed by <|im_end|>."""
    eos = S.end_of_turn_ids(tokenizer)
    turns, history, k = [], [], 0
    for index, message in enumerate(dialogue):
        fields = dict(id=index, role=message["role"], content=message["content"], raw=None, prompt=None, token_ids=None)
        if message["role"] == "assistant":
            fields["prompt"] = tokenizer.apply_chat_template(S.conversation("backend", history), tokenize=False,
                                                             add_generation_prompt=True)
            ids = sampled[k] if sampled and k in sampled else S.encode_text(tokenizer, message["content"])
            fields["token_ids"], fields["raw"] = ids + eos, message["content"]
            k += 1
        turns.append(SimpleNamespace(**fields))
        history.append(message)
    return turns


def masked(row, turn):
    return [i for i, t in zip(row.input_ids, row.turn_ids) if t == turn]


def context_of(row, turn):
    return row.input_ids[: row.turn_ids.index(turn)]


def test_each_turn_is_read_after_exactly_its_stored_prompt_and_trains_its_sampled_ids(tokenizer):
    turns = stored_turns(tokenizer, DIALOGUE)
    agent = S.agent_turns(tokenizer, "backend", turns)
    rows = S.pack(agent)
    assert len(rows) == 1  # canonical ids: the second prompt extends the first row
    for k, turn in enumerate(t for t in turns if t.role == "assistant"):
        assert context_of(rows[0], k) == S.encode_text(tokenizer, turn.prompt)
        assert masked(rows[0], k) == turn.token_ids
    assert tokenizer.decode(masked(rows[0], 1)).endswith("<|im_end|>")


def test_a_turn_whose_text_retokenises_differently_inside_the_next_prompt_keeps_both(tokenizer):
    # The policy sampled "\n\n" after the header's "assistant\n"; inside the next prompt's text
    # the three newlines merge into other tokens. Each turn is trained on what the policy saw.
    dialogue = [dict(m) for m in DIALOGUE]
    dialogue[1]["content"] = "\n\nShould it accept floats?"
    sampled = {0: S.encode_text(tokenizer, dialogue[1]["content"])}
    turns = stored_turns(tokenizer, dialogue, sampled)
    prompt1 = S.encode_text(tokenizer, turns[3].prompt)
    prompt0 = S.encode_text(tokenizer, turns[1].prompt)
    assert prompt1[: len(prompt0) + len(sampled[0])] != prompt0 + sampled[0]  # the premise
    rows = S.pack(S.agent_turns(tokenizer, "backend", turns))
    assert masked(rows[0], 0) == sampled[0] + S.end_of_turn_ids(tokenizer)
    assert len(rows) == 2 and context_of(rows[1], 1) == prompt1


def test_a_cut_context_gets_its_own_row_read_exactly_as_scoring_reads_it(tokenizer):
    turns = stored_turns(tokenizer, DIALOGUE)
    agent = S.agent_turns(tokenizer, "backend", turns)
    prefix = S.encode_text(tokenizer, "Reference solution:\ndef add(a, b):\n    return a + b\n\n")
    max_len = len(prefix) + len(agent[0].prompt_ids) + 4  # the first context fits, the second does not
    rows = S.pack(agent, prefix, max_len)
    assert len(rows) == 2 and not rows[0].truncated and rows[1].truncated
    for k, row in enumerate(rows):
        context, cut = S.fit_context(prefix, agent[k].prompt_ids, max_len)
        assert context_of(row, k) == context and cut == row.truncated
        assert masked(row, k) == agent[k].completion_ids  # the turn itself is never cut
    # c keeps its start, the context its end.
    kept = context_of(rows[1], 1)
    assert kept[: min(len(prefix), max_len // 2)] == prefix[: max_len // 2]
    assert kept[-5:] == agent[1].prompt_ids[-5:] and len(kept) == max_len


def test_imported_turns_without_prompt_or_ids_get_the_rollout_prompt_and_their_text(tokenizer):
    turns = stored_turns(tokenizer, DIALOGUE)
    for turn in turns:
        turn.prompt, turn.token_ids = None, None
    agent = S.agent_turns(tokenizer, "backend", turns)
    expected = stored_turns(tokenizer, DIALOGUE)
    assert [a.prompt_ids for a in agent] == [
        S.encode_text(tokenizer, t.prompt) for t in expected if t.role == "assistant"
    ]
    assert [a.completion_ids for a in agent] == [t.token_ids for t in expected if t.role == "assistant"]
