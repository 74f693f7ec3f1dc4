"""A turn credit from outside colbench: a turn is worth minus its length in words (shorter is better). It needs no
model, so it tests that any consumer of turn credit (`credit eval`, `--ranker`, `--turn-credit`) takes a plugin's."""
from colbench.training.credit import CREDITS, TurnCredit


class ShortTurns(TurnCredit):
    def values(self, dialogues):
        return [[-float(len((turn.content or "").split())) for turn in dialogue.agent_turns] for dialogue in dialogues]


@CREDITS.register("short-turns", "a plugin's credit: minus the turn's length in words", cost="none")
def short_turns(db, config, argument):
    return ShortTurns()
