"""How far a rebuilt policy is from the one that sampled a candidates run (`credit_signals.sh drift`).

Each candidate keeps the sampler's mean log-prob per token (`sampler_logp`). The rebuilt weights score the same
tokens at the same stored prompt; the figures are the mean and median of |difference| per candidate, and the mean
signed difference (negative: the rebuilt policy finds the samples less likely). On candidates the rebuilt weights
sampled themselves this reads 0 within float noise, so it measures the weights, not the measure.

    python scripts/credit_drift.py sqlite:///STORE/lite.db val-candidates ckpt:1 --states 40
"""
from __future__ import annotations

import argparse
import statistics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("run", help="the candidates run (its name or train:<id>)")
    parser.add_argument("policy", help="the rebuilt policy, as its dialogues name it (ckpt:<id>)")
    parser.add_argument("--states", type=int, default=40, help="its first N states of that policy's dialogues")
    args = parser.parse_args()

    import torch

    from colbench.engines.base import encode_text
    from colbench.model_refs import load_model, load_tokenizer, model_source
    from colbench.runs import resolve
    from colbench.store import queries
    from colbench.store.db import Database
    from colbench.training import sequences as S

    db = Database(args.store)
    source = model_source(db, args.policy)
    tokenizer, model = load_tokenizer(source), load_model(source, device="cpu")
    model.eval()
    with db.read() as session:
        by_turn = queries.candidates_of_run(session, resolve(session, args.run).id)
        owner = queries.trajectories_of_turns(session, sorted(by_turn))
        trajectories = queries.trajectories_by_id(session, sorted(set(owner.values())))
        states = [t for t in sorted(by_turn) if trajectories[owner[t]].policy == args.policy][: args.states]
        turns = queries.turns_for(session, sorted({owner[t] for t in states}))
    prompts = {turn.id: prompt for rows in turns.values()
               for turn, prompt in S.agent_prompts(tokenizer, "backend", rows)}
    differences = []
    for state in states:
        context = encode_text(tokenizer, prompts[state])
        for candidate in by_turn[state]:
            ids = context + list(candidate.token_ids)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids])).logits[0, len(context) - 1: len(ids) - 1]
            mean = float(torch.log_softmax(logits.float(), -1).gather(
                1, torch.tensor(candidate.token_ids)[:, None]).mean())
            differences.append(mean - candidate.sampler_logp)
    absolute = [abs(d) for d in differences]
    print(f"{args.policy} on {len(differences)} candidates of {len(states)} states: |Δ log p| per token mean "
          f"{statistics.mean(absolute):.4f}, median {statistics.median(absolute):.4f}; signed mean "
          f"{statistics.mean(differences):+.4f}")


if __name__ == "__main__":
    main()
