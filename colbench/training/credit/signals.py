"""The built-in turn credits (colbench/training/credit/__init__.py says what a credit is).

Each is registered with whether it reads training-time information (the reference c, which the agent never sees)
and what it costs per agent turn.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

from colbench import protocol
from colbench.training.credit.base import CREDITS, CreditConfig, CreditDialogue, CreditError, TurnCredit, is_answer


def _lite_only(dialogue: CreditDialogue, what: str) -> None:
    from colbench.tasks.lite import is_lite

    if not is_lite(dialogue.task):
        raise CreditError(f"{what} needs backend-lite tasks, whose every turn's truth is known: "
                          f"{'trajectory ' + str(dialogue.trajectory_id) if dialogue.trajectory_id else 'a dialogue'}"
                          " is of another task")


# ---------------------------------------------------------------- ground truth and chance


class OracleCredit(TurnCredit):
    """backend-lite's ground truth (colbench/families/lite_truth.py): a question whose reply states a fact not
    stated before is worth 1, a re-ask or one nothing answers 0; the answer its share of tests passed."""

    def __init__(self, sandbox: str):
        self.sandbox, self.grader = sandbox, None

    def values(self, dialogues):
        from colbench.families.lite_truth import ANSWER, NEW, judged

        found, answers = [], []
        for d, dialogue in enumerate(dialogues):
            _lite_only(dialogue, "the oracle credit")
            turns = dialogue.agent_turns
            row = []
            for k, kind in enumerate(judged(dialogue.task, None, turns).kinds):
                row.append(None if kind == ANSWER else float(kind == NEW))
                if kind == ANSWER:
                    code = protocol.extract_answer(turns[k].content or "", last_turn=k + 1 >= protocol.MAX_AGENT_TURNS)
                    answers.append((d, k, dialogue.task, code))
            found.append(row)
        if answers:
            if self.grader is None:
                from colbench.grading.grader import Grader

                self.grader = Grader(sandbox=self.sandbox)
            for (d, k, _, _), report in zip(answers, self.grader.grade([(task, code) for *_, task, code in answers])):
                found[d][k] = report.fraction_passed
        return found

    def close(self):
        if self.grader is not None:
            self.grader.close()
            self.grader = None


@CREDITS.register("oracle", "backend-lite's ground truth: a question that obtains a new fact 1, else 0; an answer"
                  " its share of tests passed", training_info=True, cost="no model; a sandboxed grade per answer")
def _oracle(db, config: CreditConfig, argument: str) -> TurnCredit:
    return OracleCredit(config.sandbox)


class RandomCredit(TurnCredit):
    """A control: a uniform value per turn, fixed by the seed and the dialogue up to the turn."""

    def __init__(self, seed: int):
        self.seed = seed

    def values(self, dialogues):
        found = []
        for dialogue in dialogues:
            messages, row = dialogue.messages(), []
            for position in dialogue.agent_positions():
                text = repr((self.seed, messages[: position + 1]))
                row.append(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64)
            found.append(row)
        return found


@CREDITS.register("random", "a control: a seeded uniform value per turn", cost="none")
def _random(db, config: CreditConfig, argument: str) -> TurnCredit:
    return RandomCredit(config.seed)


# ---------------------------------------------------------------- the SWEET-RL critic


class CriticCredit(TurnCredit):
    """The SWEET-RL critic's advantage of each turn, A(o_t, a_t, c): its mean log-prob of the turn minus its frozen
    reference's, read with the reference c when the critic was trained with it."""

    def __init__(self, db, ref: str, config: CreditConfig):
        from colbench.training.scoring import CriticModel

        self.critic = CriticModel.from_checkpoint(db, ref, device=config.device, batch_size=config.batch_size)
        self.training_info = self.critic.training_info
        self.reads = f"ckpt:{self.critic.checkpoint_id}"

    def values(self, dialogues):
        from colbench.training import data as D
        from colbench.training import sequences as S

        critic = self.critic
        examples = []
        for dialogue in dialogues:
            agent = S.agent_turns(critic.tokenizer, dialogue.task.family, dialogue.turns)
            prefix = D.training_info_ids(critic.tokenizer, dialogue.task.ground_truth if self.training_info else None)
            examples.append(D.Example(trajectory_id=dialogue.trajectory_id or 0, task_id=dialogue.task_id or 0,
                                      reward=float("nan"), rows=S.pack(agent, prefix, critic.max_len),
                                      turn_rows=[t.turn_id for t in agent], prefix_len=len(prefix)))
        return critic.turn_advantages(examples)


def newest_critic(db) -> str:
    from colbench.store import queries

    with db.read() as session:
        found = queries.newest_checkpoint_of(session, "critic")
    if found is None:
        raise CreditError("the critic credit needs a critic: fit one (`colbench critic fit`) or give --critic")
    return f"ckpt:{found}"


@CREDITS.register("critic", "the SWEET-RL critic's advantage of the turn (critic:<checkpoint>, else --critic; with"
                  " the reference if it was trained with it)", argument="<checkpoint>", training_info=True,
                  cost="2 forward passes per dialogue (critic, reference)")
def _critic(db, config: CreditConfig, argument: str) -> TurnCredit:
    # critic:<checkpoint> names it in the spec, so two critics score side by side (with c and without).
    return CriticCredit(db, argument or config.critic or newest_critic(db), config)


# ---------------------------------------------------------------- counterfactual replies


class ChatScorer:
    """A frozen causal LM reading dialogues as a rollout shows them (the family's system prompt, the chat
    template)."""

    def __init__(self, db, ref: str | None, config: CreditConfig):
        from colbench.model_refs import DEFAULT_MODEL, load_model, load_tokenizer, model_source, resolve_device

        source = model_source(db, ref or DEFAULT_MODEL)
        self.device = resolve_device(config.device)
        self.tokenizer = load_tokenizer(source)
        self.model = load_model(source, device=self.device)
        self.model.eval()
        self.batch_size = config.batch_size

    def context(self, family: str, messages: list[dict]) -> list[int]:
        """The ids of ``messages`` followed by the agent's generation prompt."""
        from colbench.training import sequences as S

        text = self.tokenizer.apply_chat_template(S.conversation(family, messages), tokenize=False,
                                                  add_generation_prompt=True)
        return S.encode_text(self.tokenizer, text)

    def encode(self, text: str, closed: bool = True) -> list[int]:
        from colbench.engines.base import encode_text, end_of_turn_ids

        return encode_text(self.tokenizer, text) + (end_of_turn_ids(self.tokenizer) if closed else [])

    def contrasts(self, triples: Sequence[tuple[list[int], list[int], list[int]]], reduce) -> list[float]:
        """For each (context_a, context_b, target): ``reduce(a, b, target)``, with a and b the log-softmax over the
        vocabulary at each target token's position after either context ([T, V] each).

        A credit compares two dialogues that differ only late (the human's reply or a placeholder), and the
        candidates of one state share everything before them, so the sequences are read sorted by their tokens, in
        batches of --batch-size whose longest shared prefix is computed once and its keys and values reused by
        every sequence of the batch. On a CPU that is most of each forward pass."""
        sequences = [(context, target) for a, b, target in triples for context in (a, b)]
        tables: dict[int, object] = {}
        found = [0.0] * len(triples)
        order = sorted(range(len(sequences)), key=lambda i: sequences[i][0] + sequences[i][1])
        for start in range(0, len(order), self.batch_size):
            batch = order[start: start + self.batch_size]
            for i, table in zip(batch, self._tables([sequences[i] for i in batch])):
                partner = i ^ 1  # a triple's two sequences are neighbours in ``sequences``
                if partner in tables:
                    pair = (table, tables.pop(partner)) if i % 2 == 0 else (tables.pop(partner), table)
                    found[i // 2] = float(reduce(*pair, sequences[i][1]))
                else:
                    tables[i] = table
        return found

    def _tables(self, sequences: list[tuple[list[int], list[int]]]):
        """The log-softmax tables of ``sequences`` (see ``contrasts``), each run of them that starts alike read over
        its shared prefix once (training/scoring.py's shared_prefix_logps)."""
        from itertools import groupby

        import torch

        from colbench.training.scoring import shared_prefix_logps

        found = []
        for _, run in groupby(sequences, key=lambda sequence: sequence[0][0]):  # sorted: alike starts adjoin
            run = list(run)
            full = [context + target for context, target in run]
            shared = min(len(context) for context, _ in run)
            for ids in full[1:]:
                shared = next((k for k, (x, y) in enumerate(zip(full[0][:shared], ids)) if x != y), shared)
            found += shared_prefix_logps(self.model, torch.no_grad(), full[0][:shared], [ids[shared:] for ids in full],
                                         len(run), self.tokenizer.pad_token_id or 0,
                                         tables=[len(target) for _, target in run])
        return found

    def greedy(self, contexts: list[list[int]], tokens: int) -> list[list[int]]:
        """Each context's greedy continuation (at most ``tokens``, through its end-of-sequence token), by the
        transformers engine's own loop over this model: --batch-size contexts a step, left-padded."""
        from colbench.engines.base import SamplingParams
        from colbench.engines.hf import HFEngine

        engine = HFEngine(model=self.model, tokenizer=self.tokenizer, max_batch_size=self.batch_size)
        generations = engine.generate_from_prompts(contexts, SamplingParams(temperature=0, max_new_tokens=tokens))
        return [generation.samples[0].token_ids for generation in generations]


def _replied(dialogue: CreditDialogue) -> list[tuple[int, int | None]]:
    """Per agent turn: (its index in messages, the index of the human's reply to it, None when there is none)."""
    messages = dialogue.messages()
    return [(p, p + 1 if p + 1 < len(messages) and messages[p + 1]["role"] == "user" else None)
            for p in dialogue.agent_positions()]


class InfoGainCredit(TurnCredit):
    """InfoPO's information gain (arXiv 2603.00656): how much the human's reply o_t to turn t changes the policy's
    next action, KL(π(a_{t+1} | h, o_t) ‖ π(a_{t+1} | h, placeholder)), summed over the vocabulary at each token of
    a_{t+1} and averaged over those tokens. a_{t+1} is the dialogue's next agent turn; where there is none (a
    candidate's reply ends the dialogue) the policy's greedy one under the real reply. A turn without a reply (the
    answer) gains nothing: 0."""

    def __init__(self, db, config: CreditConfig):
        self.lm, self.config = ChatScorer(db, config.model, config), config

    def values(self, dialogues):
        return _per_turn(dialogues, self.turn_triple, self.contrasts, self.kl)

    def last_values(self, dialogues):
        return _last_turn(dialogues, self.turn_triple, self.contrasts, self.kl)

    def contrasts(self, triples, reduce) -> list[float]:
        """ChatScorer.contrasts, once the next actions no turn stores (None) are generated, all in one call. An empty
        one leaves nothing to compare: 0."""
        triples = list(triples)
        missing = [k for k, triple in enumerate(triples) if triple[2] is None]
        for k, following in zip(missing, self.lm.greedy([triples[k][0] for k in missing], self.config.next_tokens)):
            triples[k] = (*triples[k][:2], following)
        kept = [k for k, triple in enumerate(triples) if triple[2]]
        found = dict(zip(kept, self.lm.contrasts([triples[k] for k in kept], reduce)))
        return [found.get(k, 0.0) for k in range(len(triples))]

    def turn_triple(self, dialogue: CreditDialogue, position: int, reply: int | None):
        """(the context with the reply, with the placeholder, the next action: None where it is to be generated),
        or None: nothing to compare."""
        if reply is None:
            return None
        messages, family = dialogue.messages(), dialogue.task.family
        real = self.lm.context(family, messages[: reply + 1])
        counterfactual = self.lm.context(family, messages[:reply] + [
            {"role": "user", "content": self.config.placeholder}])
        if real == counterfactual:
            return None
        if reply + 1 >= len(messages):
            return real, counterfactual, None
        following = self.lm.encode(messages[reply + 1]["content"])
        return (real, counterfactual, following) if following else None

    def kl(self, p, q, following: list[int]) -> float:
        import torch

        if self.config.kl_estimate == "sampled":
            taken = torch.tensor(following, device=p.device)[:, None]
            return float((p.gather(1, taken) - q.gather(1, taken)).mean())
        return float((p.exp() * (p - q)).sum(-1).mean().clamp(min=0.0))


def _per_turn(dialogues, triple_of, contrasts, reduce) -> list[list[float]]:
    """Every agent turn's value: ``reduce`` over the turn's triple (see ChatScorer.contrasts), 0 where it has none;
    every triple of every dialogue read in one call, so that shared prefixes are shared."""
    rows = [[triple_of(d, position, reply) for position, reply in _replied(d)] for d in dialogues]
    wanted = [t for row in rows for t in row if t is not None]
    found = iter(contrasts(wanted, reduce))
    return [[next(found) if t is not None else 0.0 for t in row] for row in rows]


def _last_turn(dialogues, triple_of, contrasts, reduce) -> list[float | None]:
    """The last agent turn's value alone (what a candidate at its state is worth): its triple only."""
    triples = [triple_of(d, *_replied(d)[-1]) if d.agent_positions() else None for d in dialogues]
    found = iter(contrasts([t for t in triples if t is not None], reduce))
    return [next(found) if t is not None else (0.0 if d.agent_positions() else None)
            for d, t in zip(dialogues, triples)]


@CREDITS.register("infogain", "InfoPO's information gain: KL between the policy's next action after the human's"
                  " reply and after a placeholder (--placeholder, --model)",
                  cost="2 forward passes per question (a generation where no next action is stored)")
def _infogain(db, config: CreditConfig, argument: str) -> TurnCredit:
    return InfoGainCredit(db, config)


def reference_message(reference: str) -> str:
    """c as the agent's next message would hand it over (the credit-signals plan's form)."""
    return f"Here is the function:\n```python\n{reference.strip()}\n```"


class ReferenceGainCredit(TurnCredit):
    """The privileged information gain: how much the human's reply o_t to turn t raises a frozen model's
    log-likelihood of the reference c as the agent's next message (``reference_message``),
    log p(c | h_t, a_t, o_t) − log p(c | h_t, a_t, placeholder). The answer, which gets no reply, is credited with
    what it itself does to c's likelihood: log p(c | h_t, a_t) − log p(c | h_t)."""

    def __init__(self, db, config: CreditConfig):
        self.lm, self.config = ChatScorer(db, config.scorer or config.model, config), config

    def values(self, dialogues):
        return _per_turn(dialogues, self.turn_triple, self.lm.contrasts, _likelihood_gain)

    def last_values(self, dialogues):
        return _last_turn(dialogues, self.turn_triple, self.lm.contrasts, _likelihood_gain)

    def turn_triple(self, dialogue: CreditDialogue, position: int, reply: int | None):
        messages, family = dialogue.messages(), dialogue.task.family
        if reply is None:
            with_turn, without = messages[: position + 1], messages[:position]
        else:
            with_turn = messages[: reply + 1]
            without = messages[:reply] + [{"role": "user", "content": self.config.placeholder}]
        return (self.lm.context(family, with_turn), self.lm.context(family, without),
                self.lm.encode(reference_message(dialogue.task.ground_truth)))


def _likelihood_gain(a, b, target: list[int]) -> float:
    """log p(target | context a) − log p(target | context b), from their tables."""
    import torch

    taken = torch.tensor(target, device=a.device)[:, None]
    return float(a.gather(1, taken).sum() - b.gather(1, taken).sum())


@CREDITS.register("ref-infogain", "the reference's log-likelihood gain under a frozen model when the human's reply"
                  " is added (--scorer)", training_info=True, cost="2 forward passes per turn")
def _ref_infogain(db, config: CreditConfig, argument: str) -> TurnCredit:
    return ReferenceGainCredit(db, config)


# ---------------------------------------------------------------- Monte-Carlo values


class MonteCarloCredit(TurnCredit):
    """VinePPO-style values: a state's value V is the mean reward of K continuations from it, played by the policy
    with the family's built-in simulated human and graded as a rollout grades. A turn's credit is its advantage
    V(after it and its reply) − V(before it); the answer's "after" is its own grade. ``last`` holds, per dialogue,
    the state values it read (V before the first turn, then after each turn) and each state's rewards."""

    def __init__(self, db, config: CreditConfig):
        from colbench.wiring import build_engine

        self.db, self.config = db, config
        self.engine = build_engine(db, config.engine, config.model or _default_model(), device=config.device)
        self.envs: dict[str, tuple] = {}
        self.cache: dict[tuple, list[float]] = {}  # the state's messages → its continuations' rewards
        self.last: list[dict] = []

    def env(self, family: str):
        if family not in self.envs:
            from colbench.wiring import build_env

            self.envs[family] = build_env(self.db, family, sandbox=self.config.sandbox, workers=2, render_pool=1)
        return self.envs[family][0]

    def values(self, dialogues):
        planned = [(dialogue, *self.states(dialogue)) for dialogue in dialogues]
        self.fill(planned)
        found, self.last = [], []
        for dialogue, states, _ in planned:
            rewards = [self.cache[self._key(dialogue, state)] for state in states]
            value = [sum(r) / len(r) if r else 0.0 for r in rewards]
            found.append([value[k + 1] - value[k] for k in range(len(states) - 1)])
            self.last.append({"values": value, "rewards": rewards})
        return found

    @staticmethod
    def states(dialogue: CreditDialogue) -> tuple[list[list[dict]], dict[int, list[dict]]]:
        """The dialogue's states (before its first agent turn, then after each turn and its reply), and those an
        answer ended: state index → the messages up to the answer."""
        messages = dialogue.messages()
        states = [messages[: dialogue.agent_positions()[0]]] if dialogue.agent_positions() else []
        answered = {}
        for k, (position, reply) in enumerate(_replied(dialogue)):
            if reply is None and is_answer(messages[position]["content"], k + 1):
                answered[len(states)] = messages[: position + 1]
            states.append(messages[: (reply if reply is not None else position) + 1])
        return states, answered

    def fill(self, planned) -> None:
        """Every state not yet valued gets its rewards: an answered state its own grade, else its K continuations'.
        The continuations of all the dialogues' open states run together, one engine call per round, so that a
        chunk of candidates (one new state each) fills the engine's batch rather than K rows at a time."""
        ended, open_states = {}, {}
        for dialogue, states, answered in planned:
            for s, state in enumerate(states):
                key = self._key(dialogue, state)
                if key not in self.cache:
                    (ended if s in answered else open_states)[key] = (dialogue.task, answered.get(s, state))
        grades = []
        for task, messages in ended.values():
            answer = protocol.extract_answer(messages[-1]["content"], last_turn=sum(
                m["role"] == "assistant" for m in messages) >= protocol.MAX_AGENT_TURNS) or ""
            grades.append(self.env(task.family).grade(task, answer))
        for key, grade in zip(ended, grades):
            self.cache[key] = [float(grade.result().reward)]
        by_family: dict[str, list] = {}
        for key, (task, state) in open_states.items():
            by_family.setdefault(task.family, []).append((key, task, state))
        for family, rows in by_family.items():
            for (key, _, _), rewards in zip(rows, self.continue_states(family, [(t, s) for _, t, s in rows])):
                self.cache[key] = rewards

    @staticmethod
    def _key(dialogue, state) -> tuple:
        return (dialogue.task.ground_truth, tuple((m["role"], m["content"]) for m in state))

    def continue_states(self, family_name: str, states: list[tuple]) -> list[list[float]]:
        """K continuations of each (task, messages) state of the family (the messages end with the human's): their
        rewards."""
        from colbench.engines.base import SamplingParams
        from colbench.families import family as family_named

        env, family = self.env(family_name), family_named(family_name)
        simulator = family.builtin_simulator()
        cfg = self.config
        episodes = []
        for s, (task, state) in enumerate(states):
            for j in range(cfg.mc_samples):
                episode = env.episode_class(trajectory_id=s * cfg.mc_samples + j, task=task, dialogue=list(state))
                episode.agent_turns = sum(m["role"] == "assistant" for m in state)
                episodes.append(episode)
        try:
            round_ = 0
            while any(not e.finished for e in episodes):
                moving = [e for e in episodes if not e.finished]
                params = SamplingParams(temperature=cfg.mc_temperature, max_new_tokens=cfg.mc_max_new_tokens, n=1,
                                        seed=cfg.seed * 1_000_003 + round_)
                for episode, generation in zip(moving, self.engine.generate([e.conversation() for e in moving],
                                                                            params)):
                    episode.agent_says(generation.samples[0].text)
                    if not episode.finished and episode.agent_turns >= protocol.MAX_AGENT_TURNS:
                        episode.failure = "no answer"
                asking = [e for e in moving if not e.finished]
                for episode, reply in zip(asking, simulator.reply(env.sim_requests(asking)) if asking else []):
                    episode.human_says(reply.text if reply.error is None else protocol.NO_RESPONSE,
                                       family.reply_limit)
                round_ += 1
        finally:
            simulator.close()
        grades = [env.grade_episode(e) if e.answer is not None else None for e in episodes]
        rewards = [float(g.result().reward) if g is not None else 0.0 for g in grades]
        return [rewards[s * cfg.mc_samples : (s + 1) * cfg.mc_samples] for s in range(len(states))]

    def close(self):
        self.engine.close()
        for _, close in self.envs.values():
            close()
        self.envs = {}


def _default_model() -> str:
    from colbench.model_refs import DEFAULT_MODEL

    return DEFAULT_MODEL


@CREDITS.register("mc", "Monte-Carlo advantages: K continuations per state through the built-in simulated human and"
                  " the grader (--mc-samples, --model, --engine)", training_info=True,
                  cost="K rollouts per agent turn")
def _mc(db, config: CreditConfig, argument: str) -> TurnCredit:
    return MonteCarloCredit(db, config)


