"""The instruction text for model-backed simulated humans, shared by the endpoint and
local-model simulators so both play the same person.

Everything goes into one user message: some chat templates (Gemma's, for one) refuse
a system role, and a role-swapped transcript would have to start with an assistant
turn, which other templates refuse. A single message works with every template.
"""
from __future__ import annotations

from colbench.engines.base import Message
from colbench.simulators.base import SimRequest

REPLY_RULES = """\
How to reply:
- Answer the assistant's latest message, using only the hidden information.
- If the hidden information does not settle the question, say you don't know.
- Be brief: about two sentences, plain language, like a person writing in a chat.
- Never write code, never show or quote the hidden code, never write the function for the assistant.
- Describe what you want in words (for example "amounts above 1000 get a 10% discount").
- Write only your reply, without a name or label in front of it."""

BACKEND_INSTRUCTIONS = """\
You are role-playing a person who asked an AI assistant to write a Python function for you.
You know exactly what you want: the code below (the HIDDEN INFORMATION) is what you have in mind.
The assistant cannot see it. It may ask you questions before it answers.

""" + REPLY_RULES

# backend-lite tasks: what the person knows is a few facts (a rate, a rounding rule), not code.
LITE_INSTRUCTIONS = """\
You are role-playing a person who asked an AI assistant to write a short Python function for you.
You know a few facts the function depends on (the HIDDEN INFORMATION below); the assistant cannot see them.
It may ask you questions before it answers. When it asks about one of these facts, tell it that fact;
to anything else, say you don't know.

""" + REPLY_RULES

# Any family's human that knows hidden information (a plugin's, unless its environment says more).
GENERIC_INSTRUCTIONS = """\
You are role-playing a person who asked an AI assistant for help with the task below.
You know things the assistant does not (the HIDDEN INFORMATION below). It may ask you questions.

""" + REPLY_RULES.replace(
    "- Never write code, never show or quote the hidden code, never write the function for the assistant.\n"
    "- Describe what you want in words (for example \"amounts above 1000 get a 10% discount\").\n", "")


def _transcript(dialogue: list[Message]) -> str:
    lines = []
    for message in dialogue:
        who = "You (the person)" if message["role"] == "user" else "Assistant"
        lines.append(f"{who}: {message['content']}")
    return "\n\n".join(lines)


def build_messages(request: SimRequest) -> list[Message]:
    """The chat messages a simulator model sees for one backend request."""
    from colbench.tasks.lite import facts_of

    facts = facts_of(request.task)
    if facts:
        return brief_messages(request, LITE_INSTRUCTIONS, "\n".join(f"- {fact.sentence}" for fact in facts))
    return brief_messages(request, BACKEND_INSTRUCTIONS, request.task.hidden)


def generic_brief(request: SimRequest) -> list[Message]:
    """What a simulator model is told for a task of a family that gives no brief of its own."""
    return brief_messages(request, GENERIC_INSTRUCTIONS, request.task.hidden)


def brief_messages(request: SimRequest, instructions: str, hidden: str) -> list[Message]:
    """One user message: the instructions, the task, what only the person knows, the transcript."""
    text = (
        f"{instructions}\n\n"
        f"TASK YOU GAVE THE ASSISTANT:\n{request.task.problem_description}\n\n"
        f"HIDDEN INFORMATION (only you can see this):\n{hidden}\n\n"
        f"CONVERSATION SO FAR:\n{_transcript(request.dialogue)}\n\n"
        "Write your reply to the assistant's latest message."
    )
    return [{"role": "user", "content": text}]


def clean_reply(text: str) -> str:
    """Strip a speaker label the model may add despite the instructions."""
    text = text.strip()
    for label in ("You (the person):", "Person:", "Human:", "User:", "You:"):
        if text.startswith(label):
            text = text[len(label):].strip()
            break
    return text
