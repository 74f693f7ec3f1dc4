"""Rich renderers of what a SWEET-RL run's critic preferred (`colbench critic pairs`)."""
from __future__ import annotations

from rich.table import Table


def pairs_table(result) -> Table:
    """`colbench critic pairs`: what a SWEET-RL run's critic preferred, by the kinds of the two candidates."""
    table = Table(title=f"train:{result.run_id}: {result.pairs} pairs", title_justify="left")
    table.add_column("chosen > rejected")
    table.add_column("pairs", justify="right")
    table.add_column("share", justify="right")
    for kinds, count in result.kinds.items():
        table.add_row(kinds, str(count), f"{count / result.pairs:.1%}" if result.pairs else "–")
    return table


def pairs_notes(result) -> list[str]:
    """The preferences that decide what the policy learns to do, in both directions."""
    lines = []
    for better, worse, meaning in (
        ("new fact", "nothing", "a question that obtains a fact over one that obtains nothing"),
        ("new fact", "repeat", "a new fact over re-asking a known one"),
        ("answer", "repeat", "answering over re-asking a known fact"),
        ("answer", "nothing", "answering over a question that obtains nothing")
    ):
        right, wrong = result.preferred(better, worse)
        if right + wrong:
            lines.append(f"{meaning}: {right} of {right + wrong} pairs")
    graded = result.answers_graded
    if graded:
        decided = graded.get("chosen passed more", 0) + graded.get("rejected passed more", 0)
        lines.append(
            f"two answers, graded: the chosen one passed more tests in {graded.get('chosen passed more', 0)} of the"
            f" {decided} pairs where they differ ({graded.get('same', 0)} pass the same)"
        )
    return lines
