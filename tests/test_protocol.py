"""The dialogue rules: answer extraction, fences, truncation."""
from colbench.families import family
from colbench.protocol import ANSWER_MARKER, extract_answer, strip_code_fences, truncate_reply


def test_answer_after_marker_or_on_the_last_turn():
    assert extract_answer("Do you want cents?", last_turn=False) is None
    assert extract_answer(f"ok {ANSWER_MARKER}\ndef f(): pass", last_turn=False) == "\ndef f(): pass"
    assert extract_answer("def f(): pass", last_turn=True) == "def f(): pass"


def test_answer_is_kept_exactly_and_ends_at_a_second_marker():
    # As officially: split on the marker and take the piece after the first one, white space
    # included (a space before `def` is an indentation error under the official grader).
    assert extract_answer(f"{ANSWER_MARKER} def f(): pass\n", last_turn=False) == " def f(): pass\n"
    assert extract_answer(f"{ANSWER_MARKER} a {ANSWER_MARKER} b", last_turn=False) == " a "


def test_thinking_before_output_is_not_part_of_the_visible_turn():
    from colbench.protocol import visible_text, wants_to_answer

    assert visible_text("plan: I WANT TO ANSWER: soon OUTPUT: What colour?") == " What colour?"
    assert visible_text("a OUTPUT: b OUTPUT: c") == " b "
    assert visible_text("no marker here") == "no marker here"
    assert not wants_to_answer(f"thinking {ANSWER_MARKER} OUTPUT: one more question")


def test_fences_are_stripped_only_where_they_are_markdown():
    assert strip_code_fences("```python\ndef f():\n    return 1\n```") == "def f():\n    return 1"
    assert strip_code_fences("Here:\n```\ndef f(): pass\n```\nThanks") == "def f(): pass"
    assert strip_code_fences("```py\ndef f(): pass") == "def f(): pass"  # unclosed
    code = "def f(text):\n    import re\n    return re.findall(r'```(.*?)```', text)"
    assert strip_code_fences(code) == code  # backticks inside code are not a fence
    assert strip_code_fences(f"```python\n{code}\n```") == code


def test_replies_are_cut_by_family():
    assert len(truncate_reply("x" * 1000, family("backend").reply_limit)) == 400
    assert len(truncate_reply("x" * 2000, family("frontend").reply_limit)) == 1000


def test_frontend_page_is_the_html_after_the_thinking():
    from colbench.protocol import extract_html

    text = "I think a dark header fits <html>not this</html>. OUTPUT: <html><body>page</body></html> done"
    assert extract_html(text) == "<html><body>page</body></html>"
    assert extract_html("OUTPUT:\n<body class='p-4'>x</body>") == "<body class='p-4'>x</body>"
    assert extract_html("What colours do you like?") is None
