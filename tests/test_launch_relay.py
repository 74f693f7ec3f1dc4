"""`colbench launch`'s reading of its launcher's stderr, against a stand-in launcher process that writes what torch's
elastic launcher and its trainers write (the real launch is tests/test_multiprocess.py)."""
import sys

from colbench.cli.common import ERROR
from colbench.cli.launch import _died, _run_owning_interrupts

PEER_LOST_LINE = (ERROR + "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1"
                  " typically caused by a remote worker crashing.")
REPORT = """Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  time      : 2026-12-07_21:00:00
  host      : here
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4242)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
"""


def launcher(*lines: str) -> list[str]:
    """A process that writes ``lines`` to stderr, in order, and fails as the launcher does."""
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return [sys.executable, "-c", f"import sys; sys.stderr.write({text!r}); sys.exit(1)"]


def test_a_trainer_that_lost_its_peer_does_not_hide_which_process_died(capfd):
    """A killed trainer's peer fails in its collective and may say so before the launcher reports: the report still
    names the dead process, and the peer's line is held back."""
    code, report, lost_peer = _run_owning_interrupts(launcher(PEER_LOST_LINE, REPORT), {})
    assert code == 1 and lost_peer == []
    died = _died(report)
    assert died.startswith("training process 1 died") and "SIGKILL" in died
    assert "Connection closed by peer" not in capfd.readouterr().err


def test_the_peers_line_is_kept_when_nothing_else_says_why(capfd):
    code, report, lost_peer = _run_owning_interrupts(launcher(PEER_LOST_LINE), {})
    assert (code, report) == (1, []) and lost_peer == [PEER_LOST_LINE + "\n"]


def test_a_trainers_own_error_is_the_reason_and_the_report_is_noise(capfd):
    own = ERROR + "the run name 'x' is taken"
    code, report, lost_peer = _run_owning_interrupts(launcher(own, REPORT), {})
    assert (code, report, lost_peer) == (1, [], [])
    assert own in capfd.readouterr().err
