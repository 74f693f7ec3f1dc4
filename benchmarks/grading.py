"""How fast is sandboxed grading? 200 synthetic backend tasks x 10 tests.

Three ways to grade the same answers:

- sandboxed: colbench's Grader (bwrap, and Docker where an engine and the grading image
  answer: `colbench sandbox image`), references included (cold cache), then cached;
- in-process: `exec` in this very process with a SIGALRM per test, like the official
  grader. Unsafe, and helpless against C-level loops; the upper bound on speed;
- fresh interpreter: one new Python process per task running all its tests, the
  obvious way to get process isolation.

Two mixes of answers: "benign" (75% right, 25% wrong) and "hang" (the same with 10%
of answers looping forever, in Python so that the in-process grader survives them).

The loaded run (`--mix loaded`) grades the benign mix, with 20 tasks whose tests each
compute for about 0.4 s of CPU, once on idle cores and once beside `--load` busy
processes per core: grades per second in both, and the share of tests whose grade
differs from the idle run (goal 0: a grade must not depend on what else runs).

    .venv/bin/python benchmarks/grading.py            # all three
    .venv/bin/python benchmarks/grading.py --tasks 50 --mix benign
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from colbench.grading.grader import Grader
from colbench.grading.sandboxes.docker import DockerBackend
from colbench.protocol import strip_code_fences
from colbench.tasks.spec import TaskSpec

TESTS_PER_TASK = 10
TIMEOUT_S = 1.0

# ------------------------------------------------------------------ synthetic tasks
# Each template is a small function of the kind ColBench asks for, with constants drawn
# per task so that every task (and its content hash) is different.

TEMPLATES = [
    (
        """
def shipping_cost(weight_kg, express, zone):
    base = {base} if zone == "domestic" else {base} * {factor}
    if weight_kg > {heavy}:
        base += (weight_kg - {heavy}) * {per_kg}
    if express:
        base *= 1.5
    return round(base, 2)
""",
        lambda r: f"shipping_cost({r.randint(0, 40)}, {r.choice([True, False])}, {r.choice(['domestic', 'abroad'])!r})",
    ),
    (
        """
def word_stats(text):
    counts = {{}}
    for word in text.lower().split():
        word = word.strip(".,!?")
        if len(word) >= {min_len}:
            counts[word] = counts.get(word, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:{top}]
""",
        lambda r: "word_stats(%r)"
        % " ".join(
            r.choice(["apple", "Pear", "kiwi", "fig", "plum", "date,", "lime!"]) for _ in range(r.randint(0, 30))
        ),
    ),
    (
        """
def letter_grade(scores):
    if not scores:
        return None
    average = sum(scores) / len(scores)
    for cutoff, letter in (({a}, "A"), ({b}, "B"), ({c}, "C")):
        if average >= cutoff:
            return letter
    return "F"
""",
        lambda r: f"letter_grade({[r.randint(30, 100) for _ in range(r.randint(1, 8))]})",
    ),
    (
        """
def rotate_text(text, shift):
    out = []
    for ch in text:
        if ch.isalpha():
            start = ord("a") if ch.islower() else ord("A")
            out.append(chr((ord(ch) - start + shift * {mult}) % 26 + start))
        else:
            out.append(ch)
    return "".join(out)
""",
        lambda r: "rotate_text(%r, %d)"
        % ("".join(r.choice("abcXYZ -!") for _ in range(r.randint(0, 40))), r.randint(-30, 30)),
    ),
    (
        """
def schedule(tasks, limit):
    done, used = [], 0
    for name, minutes in sorted(tasks, key=lambda t: (t[1], t[0])):
        if used + minutes * {overhead} <= limit:
            done.append(name)
            used += minutes * {overhead}
    return {{"done": done, "minutes": used, "left": limit - used}}
""",
        lambda r: "schedule(%r, %d)"
        % ([(f"t{i}", r.randint(5, 90)) for i in range(r.randint(0, 9))], r.randint(30, 300)),
    ),
]


def make_tasks(count: int, seed: int = 0) -> list[TaskSpec]:
    rng = random.Random(seed)
    tasks = []
    for index in range(count):
        source, make_call = TEMPLATES[index % len(TEMPLATES)]
        constants = dict(
            base=rng.randint(3, 20), factor=rng.randint(2, 4), heavy=rng.randint(5, 20), per_kg=rng.randint(1, 5),
            min_len=rng.randint(2, 4), top=rng.randint(2, 5), a=rng.randint(85, 95), b=rng.randint(70, 84),
            c=rng.randint(55, 69), mult=rng.randint(1, 5), overhead=rng.randint(1, 2),
        )
        reference = source.format(**constants)
        calls = {f"test{i}": make_call(rng) for i in range(1, TESTS_PER_TASK + 1)}
        tasks.append(TaskSpec("backend", f"synthetic task {index}", reference, calls))
    return tasks


def make_answers(tasks: list[TaskSpec], hang_share: float, seed: int = 1) -> list[str]:
    """Right answers (reworded), wrong ones (a constant nudged), and hanging ones."""
    rng = random.Random(seed)
    answers = []
    for task in tasks:
        draw = rng.random()
        if draw < hang_share:
            name = task.ground_truth.split("def ", 1)[1].split("(", 1)[0]
            answers.append(f"```python\ndef {name}(*args):\n    while True:\n        pass\n```")
        elif draw < hang_share + 0.25:
            answers.append(task.ground_truth.replace(" 1.5", " 1.6").replace("26", "25").replace("sum(scores)",
                                                                                                 "sum(scores) + 5")
                           .replace("[:", "[1:").replace("<= limit", "< limit"))
        else:
            answers.append("```python\n# my answer\n" + task.ground_truth.replace("    ", "\t") + "\n```")
    return answers


# ------------------------------------------------------------------ the baselines

class Alarm(Exception):
    pass


def _ring(signum, frame):
    raise Alarm()


def run_in_process(code: str, call: str):
    """Like the official grader: exec the code, evaluate the call, 1 s alarm."""
    namespace: dict = {}
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
    try:
        exec(code, namespace)
        return eval(call, namespace)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def grade_in_process(task: TaskSpec, answer: str) -> float:
    code = strip_code_fences(answer)
    passed = 0
    for call in task.test_cases.values():
        try:
            expected = run_in_process(task.ground_truth, call)
        except BaseException:
            expected = None
        try:
            actual = run_in_process(code, call)
        except BaseException:
            actual = None
        passed += expected is not None and expected == actual
    return passed / len(task.test_cases)


FRESH_SCRIPT = r"""
import json, signal, sys
job = json.load(sys.stdin)
def ring(*_): raise TimeoutError
signal.signal(signal.SIGALRM, ring)
def run(code, call):
    namespace = {}
    signal.setitimer(signal.ITIMER_REAL, job["timeout"])
    try:
        exec(code, namespace)
        return eval(call, namespace)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
passed = 0
for call in job["calls"]:
    try: expected = run(job["reference"], call)
    except BaseException: expected = None
    try: actual = run(job["answer"], call)
    except BaseException: actual = None
    passed += expected is not None and expected == actual
print(passed / len(job["calls"]))
"""


def grade_fresh(task: TaskSpec, answer: str, python: list[str]) -> float:
    job = {"reference": task.ground_truth, "answer": strip_code_fences(answer),
           "calls": list(task.test_cases.values()), "timeout": TIMEOUT_S}
    done = subprocess.run(python + ["-c", FRESH_SCRIPT], input=json.dumps(job), capture_output=True, text=True,
                          timeout=TESTS_PER_TASK * TIMEOUT_S * 3 + 10)
    return float(done.stdout or 0)


# ------------------------------------------------------------------ timing

def timed(label: str, grade_all, count: int) -> tuple[float, list[float]]:
    started = time.perf_counter()
    rewards = grade_all()
    seconds = time.perf_counter() - started
    print(
        f"  {label:<38} {count / seconds:8.1f} tasks/s   ({seconds:6.2f} s, mean reward"
        f" {sum(rewards) / len(rewards):.3f})",
        flush=True
    )
    return count / seconds, rewards


def run_mix(name: str, tasks: list[TaskSpec], answers: list[str], workers: int, sandboxes: list[str],
            baselines: bool, hangs: bool) -> dict:
    pairs = list(zip(tasks, answers))
    print(f"\n{name}: {len(tasks)} tasks x {TESTS_PER_TASK} tests, {workers} workers, {TIMEOUT_S:.0f} s per test")
    figures, rewards = {}, {}
    for sandbox in sandboxes:
        with Grader(sandbox=sandbox, workers=workers, test_timeout_s=TIMEOUT_S) as grader:
            warm_up = make_tasks(2 * workers, seed=99)  # start every sandbox before timing
            grader.grade([(t, t.ground_truth) for t in warm_up])
            figures[sandbox], rewards[sandbox] = timed(
                f"sandboxed ({sandbox}, cold reference cache)",
                lambda: [r.fraction_passed for r in grader.grade(pairs)],
                len(pairs)
            )
            if not hangs:
                figures[sandbox + " warm"], _ = timed(
                    f"sandboxed ({sandbox}, references cached)",
                    lambda: [r.fraction_passed for r in grader.grade(pairs)],
                    len(pairs)
                )
    if not baselines:
        return figures

    signal.signal(signal.SIGALRM, _ring)
    figures["in_process"], in_process = timed(
        "in-process exec (unsafe, 1 thread)", lambda: [grade_in_process(t, a) for t, a in pairs], len(pairs))
    for sandbox in sandboxes:
        mismatches = sum(abs(a - b) > 1e-9 for a, b in zip(rewards[sandbox], in_process))
        print(f"  tasks where {sandbox} and in-process rewards differ: {mismatches}")
    if not hangs:  # with hangs, the fresh-interpreter runs would only add 10 s per hanging task, serially per worker
        for label, python in (("fresh interpreter per task (venv python)", [sys.executable]),
                              ("fresh interpreter per task (python3 -I -S)", ["/usr/bin/python3", "-I", "-S"])):
            with ThreadPoolExecutor(workers) as pool:
                key = "fresh" if python == [sys.executable] else "fresh_isolated"

                def grade_all(python=python, pool=pool):
                    return list(pool.map(lambda p: grade_fresh(*p, python), pairs))

                figures[key], _ = timed(label, grade_all, len(pairs))

    for sandbox in sandboxes:
        print(f"  {sandbox} / in-process:                {figures[sandbox] / figures['in_process']:.2f}x"
              + ("" if hangs else f"   (references cached: {figures[sandbox + ' warm'] / figures['in_process']:.2f}x)"))
        if not hangs:
            print(f"  {sandbox} / fresh interpreter (venv):  {figures[sandbox] / figures['fresh']:.2f}x")
            print(f"  {sandbox} / fresh interpreter (-I -S): {figures[sandbox] / figures['fresh_isolated']:.2f}x")
    return figures


WORK = "def work(n):\n    total = 0\n    for i in range(n):\n        total += i * i % 7\n    return total\n"


def computing_tasks(count: int, cpu_s: float) -> list[TaskSpec]:
    """Tasks whose 3 tests each compute for about ``cpu_s`` of CPU (measured here, in the sandbox's Python)."""
    probe = WORK + "import time\nstarted = time.process_time()\nwork(10 ** 6)\nprint(time.process_time() - started)"
    per_million = float(subprocess.run(["/usr/bin/python3", "-c", probe], capture_output=True, text=True,
                                       check=True).stdout)
    n = int(10 ** 6 * cpu_s / per_million)
    return [TaskSpec("backend", f"computing task {k}", WORK, {f"test{i}": f"work({n + 100 * k + i})" for i in range(3)})
            for k in range(count)]


def busy_processes(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def run_loaded(tasks: list[TaskSpec], answers: list[str], workers: int, sandboxes: list[str], per_core: int) -> dict:
    computing = computing_tasks(20, 0.4)
    pairs = list(zip(tasks, answers)) + [(t, t.ground_truth) for t in computing]
    cores = len(os.sched_getaffinity(0))
    tests = sum(len(t.test_cases) for t, _ in pairs)
    print(f"\nloaded: {len(tasks)} benign tasks and {len(computing)} computing ones ({tests} tests), {workers} workers;"
          f" idle, then beside {per_core * cores} busy processes ({per_core} a core)")
    figures = {}
    for sandbox in sandboxes:
        grades = {}
        for label in ("idle", "loaded"):
            with Grader(sandbox=sandbox, workers=workers, test_timeout_s=TIMEOUT_S) as grader:  # references cold
                grader.grade([(t, t.ground_truth) for t in make_tasks(2 * workers, seed=99)])
                busy = busy_processes(per_core * cores if label == "loaded" else 0)
                try:
                    time.sleep(0.3 if busy else 0)
                    started = time.perf_counter()
                    reports = grader.grade(pairs)
                    seconds = time.perf_counter() - started
                finally:
                    for process in busy:
                        process.kill()
                        process.wait()
            grades[label] = [(t.passed, t.error) for r in reports for t in r.tests]
            figures[f"{sandbox} {label} tasks/s"] = len(pairs) / seconds
            print(f"  {sandbox:<7} {label:<7} {len(pairs) / seconds:8.1f} tasks/s   ({seconds:6.2f} s)", flush=True)
        differ = sum(a != b for a, b in zip(grades["idle"], grades["loaded"]))
        figures[f"{sandbox} differing"] = differ / tests
        print(f"  {sandbox:<7} tests graded differently loaded than idle: {differ} of {tests}"
              f" ({differ / tests:.1%}); loaded / idle speed"
              f" {figures[f'{sandbox} loaded tasks/s'] / figures[f'{sandbox} idle tasks/s']:.2f}x")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mix", choices=["benign", "hang", "loaded", "all"], default="all")
    parser.add_argument("--load", type=int, default=2, help="busy processes per core in the loaded run")
    parser.add_argument(
        "--sandbox",
        action="append",
        choices=["bwrap", "docker"],
        help="sandboxes to time (repeatable); default bwrap, and docker where an engine and the image answer"
    )
    parser.add_argument("--no-baselines", action="store_true", help="time only the sandboxed grader")
    args = parser.parse_args()
    sandboxes = args.sandbox or ["bwrap"] + (["docker"] if DockerBackend.check() is None else [])
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; sandboxes: {', '.join(sandboxes)}")
    tasks = make_tasks(args.tasks)
    if args.mix in ("loaded", "all"):
        run_loaded(tasks, make_answers(tasks, hang_share=0.0), args.workers, sandboxes, args.load)
    for mix, hang_share in (("benign", 0.0), ("hang", 0.10)):
        if args.mix in (mix, "all"):
            label = "benign answers" if mix == "benign" else "10% of answers hang"
            run_mix(label, tasks, make_answers(tasks, hang_share=hang_share), args.workers, sandboxes,
                    not args.no_baselines, hangs=hang_share > 0)


if __name__ == "__main__":
    main()
