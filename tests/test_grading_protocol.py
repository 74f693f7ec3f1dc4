"""The host's side of the result protocol (pool.py): what a reply must look like for its
tests to count. The sandboxed side is exercised by test_sandbox_attacks.py."""
from __future__ import annotations

import hmac

import pytest

from colbench.grading.pool import Job, Tampered, Worker, _parse_reply

KEY = b"k" * 32
JOB = Job("def f(x): return x", ["f(1)", "f(2)"])


def signed(job_id: str, lines: list[str], verdict: str = "ok", key: bytes = KEY) -> bytes:
    body = "".join(f"{line}\n" for line in lines).encode() + f"{job_id} D {verdict}".encode()
    return body + b" " + hmac.new(key, body, "sha256").hexdigest().encode() + b"\n"


def read(data: bytes, job: Job = JOB):
    worker = Worker(backend=None, slot=0, memory_mb=64)
    worker._key = KEY
    lines, verdict = worker._verify("j7", data)
    return _parse_reply(lines, job), verdict


def test_a_well_formed_reply_counts():
    run, verdict = read(signed("j7", ["j7 R 1 120 = 1", "j7 E 2 1000000 timeout"]))
    assert verdict == "ok"
    assert [(o.value, o.comparable, o.error, o.duration_s) for o in run.outcomes] == [
        ("1", True, None, 0.00012),
        (None, False, "timeout", 1.0)
    ]


def test_a_compile_error_fails_every_test():
    run, _ = read(signed("j7", ["j7 C SyntaxError: bad"]))
    assert run.error == "SyntaxError: bad" and [o.error for o in run.outcomes] == ["SyntaxError: bad"] * 2


@pytest.mark.parametrize(
    "data",
    [
        signed("j7", ["j7 R 1 0 = 1\rj7 R 2 0 = 2"]),  # a carriage return splits nothing here: it is refused
        signed("j7", ["j7 R 1 0 = 1", "j6 R 2 0 = 2"]),  # another job's line
        signed("j7", ["j7 R 2 0 = 2", "j7 R 1 0 = 1"]),  # out of order
        signed("j7", ["j7 R 1 0 = 1", "j7 R 1 0 = 1", "j7 R 2 0 = 2"]),  # a test twice
        signed("j7", ["j7 R 1 0 = 1"]),  # a test missing
        signed("j7", ["j7 R 1 0 = 1", "j7 R 2 0 ? 2"]),  # neither comparable nor opaque
        signed("j7", ["j7 R 1 0 = 1", "j7 R 2 0 = 2"]) + b"j7 R 1 0 = 9\n",  # after the end
        signed("j7", ["j7 R 1 0 = 1", "j7 R 2 0 = 2"], key=b"x" * 32),  # not our server's MAC
        signed("j7", ["j7 R 1 0 = 1", "j7 R 2 0 = 2"]).replace(b"= 2", b"= 3"),  # altered after signing
        signed("j7", ["j7 C oops", "j7 R 1 0 = 1", "j7 R 2 0 = 2"]),  # a compile error and results
    ],
    ids=["carriage-return", "other-job", "order", "twice", "missing", "kind", "after-end", "wrong-key", "altered",
         "mixed"],
)
def test_anything_off_protocol_is_tampering(data):
    with pytest.raises(Tampered):
        read(data)


def test_the_end_line_carries_the_servers_verdict():
    assert read(signed("j7", ["j7 R 1 0 = 1", "j7 R 2 0 = 2"], verdict="dirty"))[1] == "dirty"
    assert read(signed("j7", ["j7 R 1 0 = 1", "j7 R 2 0 = 2"], verdict="tampered"))[1] == "tampered"
