"""The built-in simulated human for backend-lite tasks (colbench.tasks.lite).

STAND-IN ONLY, like the rest of the built-in simulator: deterministic rules, no model.

A lite task's hidden information is a few facts, each with the words a question about it
would use. The person answers only *targeted* questions: the facts the agent's latest
message asks about are stated with their exact sentences, in the order they were asked;
anything else (a general "any other details?", a question about something the person
has no fact for, a statement that asks nothing) gets :data:`DONT_KNOW`. The person never
writes code and never states a fact that was not asked about.

How a message is read:

1. Code is set aside: fenced blocks, lines that open with ``def``/``return``/``import``
   and the indented lines under them, and everything after ``I WANT TO ANSWER:``. The
   text before ``OUTPUT:`` is the agent's thinking and is not read (as in the dialogue).
2. The text is cut into sentences. A sentence *asks* if it has a question mark, opens with a
   question or request word ("what", "how", "should", "please", "tell", ...) or holds a
   request phrase ("could you", "let me know", "I need to know", ...). The items of a list
   introduced by a sentence that ends in a colon and asks for something ("I need the
   following details:") ask too.
3. An asking sentence is cut into parts at "and", "or", "also", "plus", ";", "&", and at a comma
   between two questions, so that "What is the tax rate and how should I round?" and "What's
   the coverage, how many coats?" ask two things each (but "For the bulk discount, how many
   units do I need?" asks one: its first clause is no question).
4. In each part, every fact scores the keywords it shares with the part (a word matches a
   keyword in its plural, -ing or -ed forms too: "rounded" is "round"); a keyword that several
   of the task's facts share counts for each as one over their number, and a vague one
   (:data:`WEAK_KEYWORDS`: "long", "big", "many"...) half as much. The best-scoring fact is
   asked about. On a tie, a fact whose first keyword (its head word) is in the part wins
   ("What is the discount?" asks for the discount, not for when it applies); failing that,
   every tied fact is ("which rate?" on a task with two rates).

:func:`revealed_facts` gives the names of the facts a reply states, from the message alone,
so a turn's label ("did this turn obtain a fact the answer needs?") can be recomputed from a
stored dialogue: the reply to the turn revealed a fact that no earlier reply did.
"""
from __future__ import annotations

import re

from colbench.protocol import ANSWER_MARKER, visible_text
from colbench.tasks.lite import HiddenFact, facts_of, is_lite
from colbench.tasks.spec import TaskSpec

DONT_KNOW = "I don't know."

__all__ = ["DONT_KNOW", "is_lite", "reply", "revealed_facts", "asked_facts"]

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_CODE_LINE = re.compile(r"^\s*(?:def |return\b|import |from \w[\w.]* import |class |@\w)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)]|\(?[a-z][.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[?!.:])\s+|(?<=\?)(?=\S)")
_PART_SPLIT = re.compile(r"\b(?:and|or|also|plus|as well as)\b|[;&]", re.IGNORECASE)
_COMMA_QUESTION = re.compile(
    r",(?=\s*(?:what|which|how|when|where|who|why|is|are|do|does|did|should|can|could|would|will)\b)", re.IGNORECASE
)
_WORD = re.compile(r"[a-z]+")

# Keywords that say little on their own ("how long", "how big"): they count half, so that
# "How long is the break?" asks about the break rather than about a length.
WEAK_KEYWORDS = frozenset("long big large much many high low often fast first last top more extra".split())

# A sentence asks when it opens with one of these words...
_LEADS = frozenset(
    "what whats which how hows is are was were do does did should shall can could would will may might must "
    "where when who whose why tell please give let confirm clarify specify explain describe provide share "
    "any anything".split()
)
# ... or holds one of these phrases.
_REQUESTS = (
    "could you", "can you", "would you", "will you", "let me know", "tell me", "i need to know", "i'd like to know",
    "i would like to know", "i want to know", "i wonder", "i was wondering", "do you know", "please",
)
# A sentence ending in a colon with one of these words introduces a list of questions.
_LIST_ASKS = frozenset(
    "know need provide tell clarify confirm specify information info details detail questions question following "
    "clarification clarifications".split()
)


def _forms(word: str) -> set[str]:
    """A word and the base forms it may be an inflection of ("rounded" → "round")."""
    forms = {word}
    n = len(word)
    if n > 4 and word.endswith("ies"):
        forms.add(word[:-3] + "y")
    if n > 3 and word.endswith("es"):
        forms.add(word[:-2])
    if n > 3 and word.endswith("s") and not word.endswith("ss"):
        forms.add(word[:-1])
    if n > 5 and word.endswith("ing"):
        stem = word[:-3]
        forms.update({stem, stem + "e"})
        if stem[-1] == stem[-2]:
            forms.add(stem[:-1])
    if n > 4 and word.endswith("ed"):
        stem = word[:-2]
        forms.update({stem, word[:-1]})
        if stem[-1] == stem[-2]:
            forms.add(stem[:-1])
    if n > 6 and word.endswith("age"):
        forms.add(word[:-3])  # percentage → percent
    return forms


def _terms(text: str) -> set[str]:
    terms: set[str] = set()
    for word in _WORD.findall(text.lower().replace("_", " ")):
        terms |= _forms(word)
    return terms


def _prose(message: str) -> str:
    """The message without its thinking, its code and any answer."""
    text = visible_text(message)
    if ANSWER_MARKER in text:
        text = text.split(ANSWER_MARKER)[0]
    text = _FENCE.sub("\n", text)
    lines, in_code = [], False
    for line in text.splitlines():
        if _CODE_LINE.match(line):
            in_code = line.rstrip().endswith(":")
            continue
        if in_code and (line.startswith((" ", "\t")) or not line.strip()):
            continue  # the body of a function or block, blank lines in it included
        in_code = False
        lines.append(line)
    return "\n".join(lines)


def _asks(sentence: str) -> bool:
    if "?" in sentence:
        return True
    lowered = sentence.lower().strip(" \t\"'*_-:,")
    words = _WORD.findall(lowered)
    if words and words[0] in _LEADS:
        return True
    return any(phrase in lowered for phrase in _REQUESTS)


def _asking_sentences(message: str) -> list[str]:
    asking: list[str] = []
    in_list = False
    for line in _prose(message).splitlines():
        if not line.strip():
            continue
        item = _LIST_ITEM.match(line)
        if item and in_list:
            asking.append(line[item.end():])
            continue
        body = line[item.end():] if item else line
        sentences = [s for s in _SENTENCE_END.split(body.strip()) if s.strip()]
        in_list = False
        for sentence in sentences:
            if _asks(sentence):
                asking.append(sentence)
            if sentence.rstrip().endswith(":") and (
                _asks(sentence) or _LIST_ASKS & set(_WORD.findall(sentence.lower()))
            ):
                in_list = True
    return asking


def _clauses(sentence: str) -> list[str]:
    """The sentence cut at commas that separate two questions; a clause that is no question
    ("For the bulk discount, how many...") stays with the one after it."""
    clauses: list[str] = []
    asking: list[bool] = []
    for piece in _COMMA_QUESTION.split(sentence):
        words = _WORD.findall(piece.lower())
        opens = bool(words) and words[0] in _LEADS
        if clauses and not asking[-1]:
            clauses[-1] += "," + piece
            asking[-1] = opens
        else:
            clauses.append(piece)
            asking.append(opens)
    return clauses


def _weight(keyword: str) -> float:
    return 0.5 if keyword in WEAK_KEYWORDS else 1.0


def asked_facts(facts: list[HiddenFact], message: str) -> list[HiddenFact]:
    """The facts a message asks about, in the order it asks (module docstring)."""
    if not facts:
        return []
    share: dict[str, int] = {}
    for fact in facts:
        for keyword in set(fact.keywords):
            share[keyword] = share.get(keyword, 0) + 1
    asked: list[HiddenFact] = []
    for sentence in _asking_sentences(message):
        for part in (p for clause in _clauses(sentence) for p in _PART_SPLIT.split(clause)):
            terms = _terms(part)
            if not terms:
                continue
            scores = [sum(_weight(k) / share[k] for k in set(fact.keywords) if k in terms) for fact in facts]
            best = max(scores)
            if best <= 0:
                continue
            tied = [fact for fact, score in zip(facts, scores) if score == best]
            headed = [fact for fact in tied if fact.keywords and fact.keywords[0] in terms]
            for fact in headed or tied:
                if fact not in asked:
                    asked.append(fact)
    return asked


def revealed_facts(task: TaskSpec, agent_message: str) -> list[str]:
    """Names of the hidden facts the built-in human's reply to this message states ([] for a
    task that is not backend-lite)."""
    return [fact.name for fact in asked_facts(facts_of(task), str(agent_message))]


def reply(task: TaskSpec, agent_message: str) -> str:
    """The built-in human's reply on a backend-lite task: the sentences of the facts asked
    about, else DONT_KNOW."""
    asked = asked_facts(facts_of(task), str(agent_message))
    if not asked:
        return DONT_KNOW
    return " ".join(fact.sentence for fact in asked)
