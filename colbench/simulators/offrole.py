"""Off-role replies: a simulated human that stops playing the human.

The human of ColBench describes what it wants; it never writes the solution, never speaks as the agent and never
uses the agent's protocol. A reply that does is off role, whatever it reveals (a leak is the reference handed over;
an off-role reply may hand over nothing and still break the dialogue). The kinds:

- ``solution``: code (a fenced block, a ``def`` or ``class`` line) or HTML markup;
- ``as the agent``: the reply speaks under the agent's name (``Assistant:``, ``Agent:``) or writes the dialogue's
  both sides (a ``User:``/``Human:`` line after its first);
- ``protocol``: the agent's own markers (``I WANT TO ANSWER:``, ``OUTPUT:``).
"""
from __future__ import annotations

import re

from colbench import protocol

# Code is a fence or a definition line; "return the total" is how a human says what it wants, so return is not.
_CODE = re.compile(r"```|^\s*(def|class)\s+\w+\s*[(:]", re.MULTILINE)
_HTML = re.compile(r"<\s*(html|head|body|div|span|section|header|footer|nav|main|p|h[1-6]|ul|li|a|img|button|form)"
                   r"\b[^>]*>", re.IGNORECASE)
_AS_AGENT = re.compile(r"^\s*(assistant|agent|ai)\s*:", re.IGNORECASE)
_BOTH_SIDES = re.compile(r"\n\s*(user|human|assistant|agent)\s*:", re.IGNORECASE)


def off_role(reply: str) -> str | None:
    """Why ``reply`` is out of the simulated human's role (a kind above), or None."""
    if protocol.ANSWER_MARKER in reply or reply.lstrip().startswith(protocol.THINKING_MARKER):
        return "protocol"
    if _AS_AGENT.search(reply) or _BOTH_SIDES.search(reply):
        return "as the agent"
    if _CODE.search(reply) or _HTML.search(reply):
        return "solution"
    return None
