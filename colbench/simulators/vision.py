"""The frontend simulated human played by a vision-language model behind an
OpenAI-compatible endpoint (the paper used Qwen2-VL-72B-Instruct).

Each turn it sees two screenshots, the agent's latest page and the reference page (the
design the person has in mind), as base64 PNG image parts, plus our instruction text,
and describes the most important concrete differences so the agent can fix its page.
It never sees or writes HTML: the agent's code is replaced by a marker in the
transcript. The reply is returned raw; the environment cuts it to 1000 characters.

The images come in the request (``SimRequest.images = {"agent": png, "reference": png}``);
``frontend_request`` builds such a request from two render results.
"""
from __future__ import annotations

import base64
import re

from colbench.engines.base import Message
from colbench.openai_client import DEFAULT_TIMEOUT_S
from colbench.simulators.base import SimRequest, no_model_for
from colbench.simulators.endpoint import EndpointSimulator

FRONTEND_INSTRUCTIONS = """\
You are role-playing a person who asked an AI assistant to build a web page for you.
You know exactly what you want: the SECOND image is the page you have in mind. The assistant cannot see it.
The FIRST image is the page the assistant showed in its last message. If it is completely black, its page did not work.

How to reply:
- Compare the two pages and describe the most important concrete differences, so the assistant can make its page look \
like yours.
- Start with the biggest differences: missing or extra sections, the layout (what sits where, how many columns, the \
order from top to bottom), then colours (backgrounds, text, buttons), then sizes of text and elements, then wording.
- Be specific: name colours ("a dark blue header with white text"), positions ("three cards side by side below the \
title") and the exact text you want.
- If the assistant showed no page in its last message, or it is black, describe the main parts of the page you want \
instead.
- Never write HTML, CSS or code, and never mention "the first image" or "the second image": talk as the person who \
wants the page.
- Be brief, at most a short paragraph, like a person writing in a chat.
- Write only your reply, without a name or label in front of it."""

NO_IMAGES = "frontend request carries no reference screenshot (SimRequest.images['reference'])"

# An agent's page inside its message: a whole document or a body (the protocol's fallback).
_CODE = re.compile(r"<html\b.*?(?:</html\s*>|$)|<body\b.*?(?:</body\s*>|$)|```.*?(?:```|$)",
                   re.IGNORECASE | re.DOTALL)


def _transcript(dialogue: list[Message]) -> str:
    lines = []
    for message in dialogue:
        content = message["content"] if isinstance(message["content"], str) else str(message["content"])
        if message["role"] == "user":
            lines.append(f"You (the person): {content}")
        else:
            text = _CODE.sub("[the assistant showed you its page: the first image]", content)
            lines.append(f"Assistant: {text.strip()}")
    return "\n\n".join(lines)


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_vision_messages(request: SimRequest) -> list[dict]:
    """One user message: instructions, the idea, the transcript, then the two images."""
    images = request.images or {}

    agent_png = images.get("agent")
    look = (
        "Now look at the two images (first: the assistant's page; second: the page you want) "
        if agent_png else
        "The assistant did not show a page in its last message. Now look at the image (the page you want) "
    )
    text = (
        f"{FRONTEND_INSTRUCTIONS}\n\n"
        f"THE WEBSITE YOU ASKED FOR:\n{request.task.problem_description}\n\n"
        f"CONVERSATION SO FAR:\n{_transcript(request.dialogue)}\n\n"
        + look + "and write your reply to the assistant."
    )
    content = [{"type": "text", "text": text}]
    if agent_png:  # officially, a turn without a page is described in words, with no picture
        content.append({"type": "image_url", "image_url": {"url": data_url(agent_png)}})
    content.append({"type": "image_url", "image_url": {"url": data_url(images["reference"])}})
    return [{"role": "user", "content": content}]


def frontend_request(task, dialogue: list[Message], agent, reference) -> SimRequest:
    """A frontend SimRequest from two ``RenderResult``s (``agent`` is None when the turn showed no page)."""
    return SimRequest(
        task=task,
        dialogue=list(dialogue),
        images={"agent": agent.png_bytes if agent is not None else None,
                "reference": reference.png_bytes},
        dom={"agent": agent.dom_summary if agent is not None and agent.ok else None,
             "reference": reference.dom_summary},
        medium="pages",
        brief=build_vision_messages,
    )


class VisionEndpointSimulator(EndpointSimulator):
    """The endpoint simulator for frontend tasks: same client, retries and failure rules,
    with both screenshots in the request."""

    kind = "vision"
    medium = "pages"

    def __init__(self, model: str, base_url: str, api_key: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_retries: int = 3, concurrency: int = 64, max_tokens: int = 400):
        # 400 tokens is about the protocol's 1000-character cut.
        super().__init__(model, base_url, api_key, timeout_s=timeout_s, max_retries=max_retries,
                         concurrency=concurrency, max_tokens=max_tokens)

    def unanswerable(self, request: SimRequest) -> str | None:
        problem = no_model_for(request, self.medium)
        if problem is None and (not request.images or not request.images.get("reference")):
            return NO_IMAGES
        return problem
