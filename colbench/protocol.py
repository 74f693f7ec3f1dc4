"""The ColBench dialogue rules, in one place.

Everything that decides what a turn means lives here: the answer marker, how many
turns an agent gets, how long a simulated human's reply may be, and how the final
answer is cut out of the agent's text. The markers match the official data, so
official trajectories and ours read the same way.
"""
from __future__ import annotations

import re

ANSWER_MARKER = "I WANT TO ANSWER:"
MAX_AGENT_TURNS = 10
REPLY_LIMIT = {"backend": 400, "frontend": 1000}

# A Markdown fence opens at the start of a line (or after white space) with an optional
# language tag and a line break, and closes at the start of a line. Backticks inside
# code, e.g. a regex r'```(.*?)```', are not fences.
_FENCE = re.compile(r"(?:^|(?<=\s))```[A-Za-z0-9_+.-]*[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)


def wants_to_answer(agent_text: str) -> bool:
    return ANSWER_MARKER in agent_text


def extract_answer(agent_text: str, *, last_turn: bool) -> str | None:
    """The final answer in an agent turn, or None if the dialogue goes on.

    The text after the marker is the answer; on the last allowed turn the whole
    reply is taken as the answer, marker or not.
    """
    if ANSWER_MARKER in agent_text:
        return agent_text.split(ANSWER_MARKER, 1)[1].strip()
    return agent_text.strip() if last_turn else None


def strip_code_fences(answer: str) -> str:
    """Raw code from an answer that may wrap it in Markdown fences."""
    blocks = _FENCE.findall(answer)
    if blocks:
        return "\n".join(block.strip("\n") for block in blocks).strip()
    return answer.strip()


def truncate_reply(text: str, family: str) -> str:
    return text[: REPLY_LIMIT[family]]


THINKING_MARKER = "OUTPUT:"
_HTML = re.compile(r"<html\b.*?</html\s*>", re.DOTALL | re.IGNORECASE)
_BODY = re.compile(r"<body\b.*?</body\s*>", re.DOTALL | re.IGNORECASE)


def extract_html(agent_text: str) -> str | None:
    """The one page a frontend agent turn shows: an <html> document, else a <body>.

    Text before `OUTPUT:` is the agent's thinking and never holds the page.
    """
    text = agent_text.split(THINKING_MARKER, 1)[1] if THINKING_MARKER in agent_text else agent_text
    match = _HTML.search(text) or _BODY.search(text)
    return match.group(0) if match else None
