"""The ColBench dialogue rules, in one place.

Everything that decides what a turn means lives here: the answer marker, how many
turns an agent gets, how a simulated human's reply is cut (each task family sets its
limit, colbench.families), and how the final
answer is cut out of the agent's text. The markers match the official data, so
official trajectories and ours read the same way.
"""
from __future__ import annotations

import re

ANSWER_MARKER = "I WANT TO ANSWER:"
THINKING_MARKER = "OUTPUT:"
MAX_AGENT_TURNS = 10
TEMPERATURE = 1.0  # the agent samples at 1.0, at evaluation too
MAX_NEW_TOKENS = 1024  # per agent turn
# The human's reply when the simulator could not give one: as officially, the dialogue
# goes on with it and the trajectory is graded like any other.
NO_RESPONSE = "No response."

# A Markdown fence opens at the start of a line (or after white space) with an optional
# language tag and a line break, and closes at the start of a line. Backticks inside
# code, e.g. a regex r'```(.*?)```', are not fences.
_FENCE = re.compile(r"(?:^|(?<=\s))```[A-Za-z0-9_+.-]*[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)


def wants_to_answer(agent_text: str) -> bool:
    return ANSWER_MARKER in visible_text(agent_text)


def visible_text(agent_text: str) -> str:
    """What an agent turn says to the human: the text after `OUTPUT:` when the turn has one.

    As in the official environments (both families): the thinking before the first
    `OUTPUT:` is dropped, and so is anything after a second one. The dialogue, and so
    the simulated human and the agent's own later prompts, keep only this part; the
    store keeps the raw generation beside it.
    """
    if THINKING_MARKER in agent_text:
        return agent_text.split(THINKING_MARKER)[1]
    return agent_text


def extract_answer(agent_text: str, *, last_turn: bool) -> str | None:
    """The final answer in an agent turn's visible text, or None if the dialogue goes on.

    As officially: the text between the first marker and the next one (or the end) is
    the answer; on the last allowed turn the whole text is taken, marker or not. It is
    kept exactly, white space included: under the official grader an answer that starts
    with a space on the marker's line is an indentation error.
    """
    if ANSWER_MARKER in agent_text:
        return agent_text.split(ANSWER_MARKER)[1]
    return agent_text if last_turn else None


def strip_code_fences(answer: str) -> str:
    """Raw code from an answer that may wrap it in Markdown fences."""
    blocks = _FENCE.findall(answer)
    if blocks:
        return "\n".join(block.strip("\n") for block in blocks).strip()
    return answer.strip()


def truncate_reply(text: str, limit: int) -> str:
    """The part of a simulated human's reply the agent is shown: ``limit`` is the task family's reply limit."""
    return text[:limit]


_HTML = re.compile(r"<html\b.*?</html\s*>", re.DOTALL | re.IGNORECASE)
_BODY = re.compile(r"<body\b.*?</body\s*>", re.DOTALL | re.IGNORECASE)


def extract_html(agent_text: str) -> str | None:
    """The one page a frontend agent turn shows: an <html> document, else a <body>.

    Text before `OUTPUT:` is the agent's thinking and never holds the page.
    """
    text = visible_text(agent_text)
    match = _HTML.search(text) or _BODY.search(text)
    return match.group(0) if match else None
