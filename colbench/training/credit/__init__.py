"""Turn credit: what each agent turn of a dialogue is worth, from any of several signals behind one interface.

A credit reads dialogues (stored ones, or a stored prefix continued by a sampled candidate turn and the simulated
human's reply to it) and gives a value per agent turn. Its consumers never ask which signal it is:

- ``colbench credit eval`` scores signals against backend-lite's ground truth (colbench/training/credit/evaluate.py);
- ``policy fit --algo sweet --ranker NAME`` ranks candidate turns with it (the value of the candidate's turn);
- online RL's ``--turn-credit NAME`` moves each dialogue's advantage between its turns by it.

Registered here and in colbench/training/credit/signals.py; a plugin registers more under the entry-point group
``colbench.credits``. Each says whether it reads training-time information (the reference the agent never sees)
and what it costs per agent turn.
"""
from colbench.training.credit.base import (  # noqa: F401 - the interface, in one place
    CREDITS, CreditConfig, CreditDialogue, CreditError, State, TurnCredit, candidate_values, check_credit, continued,
    credits_help, human_replies, is_answer, make_credit, stored_dialogues, unstored_turn,
)
from colbench.training.credit import signals  # noqa: F401,E402 - registers the built-in credits
