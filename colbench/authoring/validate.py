"""Check tasks before they are used: `colbench tasks validate`, and the filter of `tasks generate`.

Rules, in the order they are reported:

- **well-formed**: the fields are there; the description ends with the signature
  sentence ("The signature of the function is: def f(a, b)"); the reference parses
  and defines exactly one top-level function, named as in the signature and with the
  same parameters (names and kinds; defaults too where the signature states them).
  Beside the function, the reference may hold imports, a docstring and constant
  assignments (`RATES = {...}`), nothing else (though under the official grading its
  function cannot see them: see "passable officially"). Frontend: an <html> document.
- **frontend, in the browser** (`check_frontend_rendering`): the reference renders,
  no request that would leave the machine remains after the offline rewrite (fits the
  protocol), and two renders of it score a similarity of 1 (deterministic).
- **deterministic**: statically, the reference uses no randomness, clock, I/O, network
  or process state (imports of random, time, os, sys, socket, subprocess, ...; calls
  of open, input, eval, exec, id, hash, datetime.now, ...; print is only a warning).
  Dynamically, the reference runs twice, in sandboxes with different string-hash seeds
  (graded answers and references always share one), and every test's canonical output
  must be the same both times: a correct answer must not pass or fail by the seed.
  This is done by grading the reference against itself: the grader runs the reference
  in its reference pool and the "answer" in its answer pool. The answer copy is sent
  hex-encoded and exec'd, so the grader's fence stripping cannot alter it.
- **fits the protocol**: the tests are test1..testN with N = `exact_tests` when given
  (10 for the built-in sets), else at least one; each is a Python expression that
  calls the function; each reference output is not None, has a canonical form (no
  NaN, no opaque object), and arrives within the time limit. The reference survives
  the answer clean-up unchanged (answers are cut at Markdown fences before they run,
  so a reference with a line opening a fence could never be matched by an answer).
  **Passable officially**: graded as an answer under the official grading (semantics.py),
  the reference passes all its tests. This catches a reference that trips the official
  blacklist (a function named `sudoku_...` contains "sudo", so every answer defining it
  scores 0), one cut by the official fence rule (any ``` in it), and one whose official
  scoping fails (it recurses, or calls a top-level helper or import, from inside its
  function). Such a task cannot be passed under the default grading.
- **needs clarification**: the stored naive solution (written from the description
  alone) parses and fails at least one test. A task without one is a warning ("no
  naive solution, not checked") unless `require_naive`.
- **no duplicates**: no two tasks share a description (up to whitespace) or a
  reference up to formatting. References are compared as `ast.dump` of the parsed code
  (so whitespace, comments and quoting do not matter) with docstrings dropped, the
  function renamed to `_f` and its parameters to `_p0, _p1, ...`; the first of a
  group passes, later ones fail and name the first. `existing` tasks (e.g. the store)
  count as earlier ones.

Code is only parsed here (`ast`), never executed: running it is the sandbox's job.
"""
from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from colbench.progress import Progress, Tally
from colbench.protocol import strip_code_fences
from colbench.families import DEFAULT_FAMILY, registry as family_registry
from colbench.tasks.spec import TaskSpec

WELL_FORMED = "well-formed"
DETERMINISTIC = "deterministic"
PROTOCOL = "fits the protocol"
CLARIFICATION = "needs clarification"
DUPLICATES = "no duplicates"
RULES = (WELL_FORMED, DETERMINISTIC, PROTOCOL, CLARIFICATION, DUPLICATES)
# The check suites a family names (TaskFamily.task_checks): a reference function run against its tests, a reference
# page rendered in a browser, or the format and duplicate checks alone (any other family's tasks).
CODE, PAGE, FORMAT = "code", "page", "format"
TASK_CHECKS = (CODE, PAGE, FORMAT)

PASS, FAIL, WARN, SKIP = "passed", "failed", "warning", "skipped"

SIGNATURE = re.compile(
    r"The signature of the function is:?\s*(?:`{1,3}(?:python)?\s*)?def\s+([A-Za-z_]\w*)\s*\((.*)\)"
    r"(?:\s*->\s*[^:`]+?)?\s*:?\s*`{0,3}\s*\.?\s*$",
    re.DOTALL,
)

# Modules whose use makes an output depend on more than the arguments.
BANNED_MODULES = {
    "random", "secrets", "time", "os", "sys", "socket", "subprocess", "shutil", "pathlib", "io",
    "tempfile", "glob", "urllib", "http", "ftplib", "smtplib", "requests", "httpx", "threading",
    "multiprocessing", "concurrent", "asyncio", "uuid", "signal", "ctypes", "importlib", "builtins",
    "select", "selectors", "ssl", "webbrowser", "platform", "getpass", "pwd", "resource", "gc",
    "pickle", "shelve", "sqlite3", "fileinput", "faulthandler", "sched", "zoneinfo",
}
BANNED_CALLS = {
    "open": "file I/O", "input": "reads input", "exec": "dynamic code", "eval": "dynamic code",
    "compile": "dynamic code", "__import__": "dynamic import", "breakpoint": "debugger",
    "id": "object addresses vary between runs", "hash": "string hashes vary between runs",
    "exit": "exits the process", "quit": "exits the process", "globals": "process state",
}
CLOCK_METHODS = {"now", "today", "utcnow"}

OFFICIALLY = "graded as an answer under the official grading, the reference"
SCOPING_HINT = (
    "official scoping: names defined at the reference's top level (helpers, imports, the function itself "
    "when it recurses) are invisible inside its functions"
)


@dataclass
class Finding:
    rule: str
    message: str
    level: str = FAIL  # FAIL or WARN


@dataclass
class TaskCheck:
    """The verdict on one task."""

    index: int  # position in the input
    where: str  # "file.jsonl:12", or "task 3"
    function: str | None  # the function's name, when it could be found
    findings: list[Finding] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)  # rule → passed|failed|warning|skipped
    naive_passes_all: bool | None = None  # None: not checked
    rendered: bool = False  # frontend: the browser checks ran

    @property
    def ok(self) -> bool:
        return not any(f.level == FAIL for f in self.findings)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.level == FAIL]

    @property
    def first_failed_rule(self) -> str | None:
        for rule in RULES:
            if self.rules.get(rule) == FAIL:
                return rule
        return None

    @property
    def label(self) -> str:
        return f"{self.where} {self.function}" if self.function else self.where


@dataclass
class ValidationReport:
    checks: list[TaskCheck]
    sandbox: str | None  # the grader's backend; None if nothing was run

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def failed(self) -> list[TaskCheck]:
        return [check for check in self.checks if not check.ok]

    @property
    def passed_indices(self) -> list[int]:
        return [check.index for check in self.checks if check.ok]

    def counts(self) -> dict[str, dict[str, int]]:
        table = {rule: {PASS: 0, FAIL: 0, WARN: 0, SKIP: 0} for rule in RULES}
        for check in self.checks:
            for rule in RULES:
                table[rule][check.rules.get(rule, SKIP)] += 1
        return table

    @property
    def naive_checked(self) -> int:
        return sum(check.naive_passes_all is not None for check in self.checks)

    @property
    def naive_passing(self) -> int:
        return sum(bool(check.naive_passes_all) for check in self.checks)

    @property
    def naive_pass_share(self) -> float | None:
        return self.naive_passing / self.naive_checked if self.naive_checked else None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tasks": len(self.checks),
            "failed_tasks": len(self.failed),
            "sandbox": self.sandbox,
            "rules": self.counts(),
            "naive_checked": self.naive_checked,
            "naive_passes_all": self.naive_passing,
            "naive_pass_share": self.naive_pass_share,
            "findings": [
                {"where": c.where, "function": c.function, **asdict(f)} for c in self.checks for f in c.findings
            ],
        }


# ---------------------------------------------------------------- static checks (parse only)


@dataclass
class _Parsed:
    """What the static pass learnt about a backend task, for the later passes."""

    function: str | None = None
    reference_ok: bool = False  # parsed and defines the function: worth running
    naive_ok: bool = False  # parsed and defines the function: worth grading
    tests_ok: bool = False
    dedupe_key: str | None = None


def _signature(description: str) -> tuple[str, ast.arguments] | str:
    """(name, parsed parameters) from the closing signature sentence, or why there is none."""
    match = SIGNATURE.search(description.strip())
    if not match:
        return "the description does not end with 'The signature of the function is: def NAME(PARAMS)'"
    name, params = match.group(1), match.group(2)
    try:
        tree = ast.parse(f"def {name}({params}):\n    pass\n")
    except SyntaxError:
        return f"the signature 'def {name}({params})' does not parse"
    return name, tree.body[0].args


def _param_shape(args: ast.arguments, with_defaults: bool) -> list[tuple]:
    shape = []
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        kind = "positional-only" if i < len(args.posonlyargs) else "positional"
        shape.append((kind, arg.arg, ast.dump(default) if with_defaults and default else None))
    if args.vararg:
        shape.append(("*args", args.vararg.arg, None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        shape.append(("keyword-only", arg.arg, ast.dump(default) if with_defaults and default else None))
    if args.kwarg:
        shape.append(("**kwargs", args.kwarg.arg, None))
    return shape


def _show_params(args: ast.arguments) -> str:
    return ast.unparse(args)


def _is_constant_value(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _top_level_problems(tree: ast.Module, what: str) -> tuple[list[ast.FunctionDef], list[str]]:
    functions, problems = [], []
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef):
            functions.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        elif (
            i == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            continue  # module docstring
        elif (
            isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _is_constant_value(node.value)
        ):
            continue  # a constant table beside the function
        elif isinstance(node, ast.AsyncFunctionDef):
            problems.append(f"{what} defines an async function '{node.name}' (line {node.lineno})")
        elif isinstance(node, ast.ClassDef):
            problems.append(f"{what} defines a class '{node.name}' at top level (line {node.lineno})")
        else:
            problems.append(
                f"{what} has a top-level {type(node).__name__} statement at line {node.lineno}; only imports,"
                " constants and the function may stand there"
            )
    return functions, problems


def _parse_code(code: str | None, what: str) -> tuple[ast.Module | None, str | None]:
    if code is None or not code.strip():
        return None, f"{what} is empty"
    try:
        return ast.parse(code), None
    except SyntaxError as exc:
        return None, f"{what} does not parse: {exc.msg} (line {exc.lineno})"
    except (ValueError, MemoryError, RecursionError) as exc:
        return None, f"{what} does not parse: {type(exc).__name__}"


def _nondeterminism(tree: ast.Module) -> tuple[list[str], list[str]]:
    """(failures, warnings): uses of randomness, clocks, I/O, network, process state."""
    failures: list[str] = []
    warnings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in BANNED_MODULES:
                    failures.append(f"imports {alias.name} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in BANNED_MODULES:
                failures.append(f"imports from {node.module} (line {node.lineno})")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in BANNED_CALLS:
                failures.append(f"calls {func.id}() (line {node.lineno}): {BANNED_CALLS[func.id]}")
            elif isinstance(func, ast.Name) and func.id == "print":
                warnings.append(f"prints (line {node.lineno}); the output is ignored")
            elif isinstance(func, ast.Attribute) and func.attr in CLOCK_METHODS:
                failures.append(f"reads the clock with .{func.attr}() (line {node.lineno})")
    return list(dict.fromkeys(failures)), list(dict.fromkeys(warnings))


class _Normalise(ast.NodeTransformer):
    def __init__(self, function: str, params: list[str]):
        self.names = {function: "_f", **{p: f"_p{i}" for i, p in enumerate(params)}}

    def _drop_docstring(self, node):
        if (
            node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)
        ):
            node.body = node.body[1:] or [ast.Pass()]
        return node

    def visit_Module(self, node):
        self.generic_visit(node)
        return self._drop_docstring(node)

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.name = self.names.get(node.name, node.name)
        node.returns = None
        return self._drop_docstring(node)

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.names.get(node.arg, node.arg)
        node.annotation = None
        return node


def dedupe_key(reference: str) -> str | None:
    """The reference up to formatting (see the module docstring), or None if it does not parse."""
    tree, problem = _parse_code(reference, "reference")
    if tree is None:
        return None
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if len(functions) == 1:
        fn = functions[0]
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        params += [a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
        tree = _Normalise(fn.name, params).visit(tree)
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _description_key(description: str) -> str:
    return " ".join(description.split()).lower()


def _defines(tree: ast.Module, name: str) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body)


def _check_backend_static(spec: TaskSpec, check: TaskCheck, exact_tests: int | None, require_naive: bool) -> _Parsed:
    parsed = _Parsed()

    def fail(rule: str, message: str) -> None:
        check.findings.append(Finding(rule, message))

    # well-formed: fields, signature sentence, the reference and its one function
    if not isinstance(spec.problem_description, str) or not spec.problem_description.strip():
        fail(WELL_FORMED, "problem_description is missing or empty")
        signature = None
    else:
        signature = _signature(spec.problem_description)
        if isinstance(signature, str):
            fail(WELL_FORMED, signature)
            signature = None
    name = signature[0] if signature else None
    check.function = name
    tree, problem = _parse_code(spec.ground_truth, "the reference")
    if problem:
        fail(WELL_FORMED, problem)
    if tree is not None:
        functions, problems = _top_level_problems(tree, "the reference")
        for message in problems:
            fail(WELL_FORMED, message)
        if len(functions) != 1:
            names = ", ".join(f.name for f in functions) or "none"
            fail(WELL_FORMED,
                 f"the reference must define exactly one top-level function; it defines {len(functions)} ({names})")
        if len(functions) == 1:
            fn = functions[0]
            check.function = check.function or fn.name
            parsed.reference_ok = True
            if name is not None and fn.name != name:
                fail(WELL_FORMED, f"the reference defines '{fn.name}' but the signature names '{name}'")
                parsed.reference_ok = False
            elif signature is not None:
                stated = signature[1]
                with_defaults = bool(stated.defaults or any(stated.kw_defaults))
                want, got = _param_shape(stated, with_defaults), _param_shape(fn.args, with_defaults)
                if want != got:
                    fail(WELL_FORMED, (
                        f"parameters differ: the signature says ({_show_params(stated)}), the reference has"
                        f" ({_show_params(fn.args)})"
                    ))
        elif functions and name is not None:
            parsed.reference_ok = _defines(tree, name)
        parsed.function = check.function
        parsed.dedupe_key = dedupe_key(spec.ground_truth)

        # deterministic (static part)
        failures, warnings = _nondeterminism(tree)
        for message in failures:
            fail(DETERMINISTIC, f"the reference {message}")
        for message in warnings:
            check.findings.append(Finding(DETERMINISTIC, f"the reference {message}", WARN))

    # fits the protocol (static part): fences, test names and calls
    if isinstance(spec.ground_truth, str) and strip_code_fences(spec.ground_truth) != spec.ground_truth.strip():
        fail(PROTOCOL, "the reference reads as Markdown code fences (a line opening with ```); answers are cut "
             "at fences before they run, so an answer written like the reference cannot pass")
    tests = spec.test_cases if isinstance(spec.test_cases, dict) else {}
    if exact_tests is not None:
        expected = [f"test{i}" for i in range(1, exact_tests + 1)]
        if sorted(tests) != sorted(expected):
            fail(
                PROTOCOL,
                f"needs exactly {exact_tests} tests named test1..test{exact_tests}; has {len(tests)}"
                + (f" ({', '.join(sorted(tests)[:12])})" if tests else "")
            )
    elif not tests:
        fail(PROTOCOL, "has no test cases")
    parsed.tests_ok = bool(tests)
    function = check.function
    not_calling = []
    for test_name, call in tests.items():
        if not isinstance(call, str) or not call.strip():
            fail(PROTOCOL, f"{test_name} is not a call expression string")
            parsed.tests_ok = False
            continue
        try:
            expr = ast.parse(call.strip(), mode="eval")
        except SyntaxError as exc:
            fail(PROTOCOL, f"{test_name} does not parse as an expression: {exc.msg}")
            parsed.tests_ok = False
            continue
        calls = {n.func.id for n in ast.walk(expr) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        if function and function not in calls:
            not_calling.append((test_name, call.strip()[:80]))
    if not_calling:
        verb = "does" if len(not_calling) == 1 else "do"
        fail(PROTOCOL,
             f"{_tests_phrase([t for t, _ in not_calling])} {verb} not call {function}(); e.g. {not_calling[0][1]}")

    # needs clarification (static part)
    if spec.naive_solution is None or not spec.naive_solution.strip():
        if require_naive:
            fail(CLARIFICATION, "no naive solution")
        else:
            check.findings.append(Finding(CLARIFICATION, "no naive solution, not checked", WARN))
    else:
        naive_tree, problem = _parse_code(spec.naive_solution, "the naive solution")
        if problem:
            fail(CLARIFICATION, problem)
        elif function and not _defines(naive_tree, function):
            fail(CLARIFICATION, f"the naive solution does not define {function}()")
        else:
            parsed.naive_ok = True
    return parsed


def _check_frontend_static(spec: TaskSpec, check: TaskCheck) -> None:
    """Frontend, before the browser: a description and an <html> document."""
    if not isinstance(spec.problem_description, str) or not spec.problem_description.strip():
        check.findings.append(Finding(WELL_FORMED, "problem_description is missing or empty"))
    page = spec.ground_truth or ""
    if not re.search(r"<html[\s>]", page, re.IGNORECASE) or not re.search(r"</html\s*>", page, re.IGNORECASE):
        check.findings.append(Finding(WELL_FORMED, "the reference is not an <html>...</html> document"))


def check_frontend_rendering(specs: Sequence[TaskSpec], checks: Sequence[TaskCheck], renderer=None) -> None:
    """Frontend checks in a real browser: the reference renders, with no request left that
    would leave the machine after the offline rewrite (fits the protocol), and two renders
    of it are the same page: its similarity to itself is 1 (deterministic).
    """
    from colbench.render.browser import Renderer
    from colbench.similarity import make_similarity

    similarity = make_similarity(None)
    own = renderer is None
    renderer = renderer or Renderer(pool_size=2).start()
    try:
        for spec, check in zip(specs, checks):
            if not check.ok:
                continue
            blocked_before = len(renderer.blocked)
            first, second = renderer.render_many([spec.ground_truth, spec.ground_truth])
            check.rendered = True
            if not first.ok:
                check.findings.append(Finding(PROTOCOL, f"the reference does not render: {first.error}"))
                continue
            fetches = list(renderer.blocked)[blocked_before:]
            if fetches:
                check.findings.append(Finding(PROTOCOL,
                                              f"the page still fetches {fetches[0]} after the offline rewrite"))
            same = similarity.score(first.png_bytes, second.png_bytes) if second.ok else 0.0
            if same < 0.999:
                check.findings.append(Finding(DETERMINISTIC,
                                              f"two renders of the reference differ (similarity {same:.3f})"))
    finally:
        if own:
            renderer.close()


# ---------------------------------------------------------------- the whole pass


def validate_tasks(
    specs: Sequence[TaskSpec],
    *,
    sandbox: str = "auto",
    exact_tests: int | None = None,
    require_naive: bool = False,
    where: Sequence[str] | None = None,
    existing: Iterable[TaskSpec] = (),
    grader=None,
    workers: int = 2,
    test_timeout_s: float = 1.0,
    progress: Progress | None = None,
) -> ValidationReport:
    """Check every task against the rules (module docstring); one TaskCheck per spec, in order.

    `where` names each task in messages (default "task N"); `existing` are earlier tasks
    that a duplicate may not repeat; `grader` is an open Grader to reuse (else one is
    opened on `sandbox` and closed at the end). Raises SandboxUnavailable when backend
    tasks need running and no sandbox is available.
    """
    tally = Tally(progress, "validate", len(specs))
    labels = list(where) if where is not None else [f"task {i + 1}" for i in range(len(specs))]
    checks = [TaskCheck(i, labels[i], None) for i in range(len(specs))]
    parsed: list[_Parsed | None] = [None] * len(specs)
    for i, spec in enumerate(specs):
        owner = family_registry().get(spec.family)
        if owner is None:
            checks[i].findings.append(Finding(WELL_FORMED, f"unknown family {spec.family!r}"))
        elif owner.task_checks == CODE:
            parsed[i] = _check_backend_static(spec, checks[i], exact_tests, require_naive)
        elif owner.task_checks == PAGE:
            _check_frontend_static(spec, checks[i])

    frontend = [i for i, spec in enumerate(specs) if _checks_of(spec) == PAGE]
    if frontend:
        check_frontend_rendering([specs[i] for i in frontend], [checks[i] for i in frontend])
    for _ in frontend:
        tally(1)

    _check_duplicates(specs, checks, parsed, existing)

    runnable = [i for i, p in enumerate(parsed) if p is not None and p.reference_ok and p.tests_ok]
    backend_name = None
    if runnable:
        from colbench.grading.grader import Grader
        from colbench.grading.sandboxes.base import HASH_SEED

        own = grader is None
        if own:
            grader = Grader(sandbox=sandbox, workers=workers, test_timeout_s=test_timeout_s)
        official = reseeded = None
        try:
            backend_name = grader.backend
            timeout = getattr(grader, "test_timeout_s", test_timeout_s)
            official = grader
            if getattr(grader, "grading", "official") != "official":  # a grader under strict grading was given
                official = Grader(sandbox=grader.backend, workers=workers, test_timeout_s=timeout)
            reseeded = Grader(sandbox=grader.backend, workers=workers, test_timeout_s=timeout,
                              grading=getattr(grader, "grading", "official"),
                              answer_hash_seed=HASH_SEED + 1)
            _run_checks(grader, official, reseeded, specs, checks, parsed, runnable, tally)
        finally:
            if official is not None and official is not grader:
                official.close()
            if reseeded is not None:
                reseeded.close()
            if own:
                grader.close()
    for i, p in enumerate(parsed):
        if p is not None and i not in set(runnable):
            tally(1)

    for i, check in enumerate(checks):
        _settle_rules(check, specs[i], parsed[i], i in set(runnable))
    return ValidationReport(checks, backend_name)


def _run_checks(grader, official, reseeded, specs, checks, parsed, runnable, tally) -> None:
    """Grade each reference against itself (two runs under two hash seeds: ``reseeded``), then as
    an answer under the official grading (`official`, a Grader under it: one more job per task,
    the reference run being cached when it is `grader`), then each naive solution."""
    timeout = getattr(grader, "test_timeout_s", 1.0)
    self_runs = {i: reseeded.submit(specs[i], _verbatim(specs[i].ground_truth)) for i in runnable}
    official_runs = {i: official.submit(specs[i], specs[i].ground_truth) for i in runnable}
    naive_runs = {i: grader.submit(specs[i], specs[i].naive_solution) for i in runnable if parsed[i].naive_ok}
    for i in runnable:
        check = checks[i]
        report = self_runs[i].result()
        _judge_reference(report, check, timeout)
        _judge_official(official_runs[i].result(), report, check, specs[i].ground_truth)
        if i in naive_runs:
            naive = naive_runs[i].result()
            reference_usable = all(t.expected not in (None, "None") for t in report.tests)
            if naive.success:
                check.naive_passes_all = True
                check.findings.append(
                    Finding(
                        CLARIFICATION,
                        f"the naive solution passes all {len(naive.tests)} tests: the task needs no clarification"
                    )
                )
            elif reference_usable:
                check.naive_passes_all = False
        tally(1)


def _verbatim(code: str) -> str:
    """The reference as an answer that survives the grader's answer clean-up.

    Answers lose their Markdown code fences before they run, which would cut a
    reference holding ``` in a string; hex-encoded and exec'd at module level, the
    code runs exactly as written and defines its function in the answer's namespace.
    """
    return f"exec(bytes.fromhex('{code.encode('utf-8').hex()}').decode('utf-8'))\n"


def _judge_reference(report, check: TaskCheck, timeout: float) -> None:
    def fail(rule: str, message: str) -> None:
        check.findings.append(Finding(rule, message))

    error = report.error or ""
    bare = error[len("reference failed: "):] if error.startswith("reference failed: ") else error
    if report.sandbox_failed:
        fail(PROTOCOL, f"could not run the reference: {bare}")
        return
    if error and all(test.expected is None for test in report.tests):
        fail(PROTOCOL, f"the reference does not run: {bare}")
        return
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}  # (rule, level, what) → [(test, example)]

    def note(rule: str, what: str, test, example: str, level: str = FAIL) -> None:
        groups.setdefault((rule, level, what), []).append((test.name, example))

    for test in report.tests:
        first, second = test.expected, test.actual
        call = test.call[:80]
        if first is None or second is None:
            error = test.error or "error"
            if error.startswith("reference failed: "):
                error = error[len("reference failed: ") :]
            if test.timed_out:
                note(PROTOCOL, f"takes longer than the {timeout:g} s limit", test, call)
            else:
                note(PROTOCOL, "raises", test, f"{error}, for {call}")
            if (first is None) != (second is None):
                note(DETERMINISTIC, "fails in one run and not in the other", test, call)
        elif first == "None":
            note(PROTOCOL, "returns None", test, call)
        elif first != second:
            note(DETERMINISTIC, "gives different outputs in two runs", test,
                 f"{test.name} gave {_clip(first)} then {_clip(second)}")
        elif not test.passed:
            note(PROTOCOL, "has an output with no canonical form (NaN or an opaque object)", test,
                 f"{_clip(first)}, for {call}")
        elif test.duration_s > 0.5 * timeout:
            note(PROTOCOL, "takes over half the time limit", test, f"{test.duration_s:.2f} s, for {call}", WARN)
    for (rule, level, what), hits in groups.items():
        check.findings.append(Finding(rule, f"{what} on {_tests_phrase([name for name, _ in hits])}; e.g. {hits[0][1]}",
                                      level))


def _judge_official(answer, self_run, check: TaskCheck, reference: str) -> None:
    """Passable officially: the reference, graded as an answer under the official grading,
    passes every test. `self_run` (the reference against itself) tells which failures are
    already reported: a test the reference itself fails there is not repeated here, unless
    it fails with a NameError, the mark of the official scoping."""
    if answer.success:
        return
    error = answer.error or ""
    if answer.sandbox_failed:
        check.findings.append(
            Finding(PROTOCOL, f"could not grade the reference as an answer under the official grading: {error}")
        )
        return
    if answer.banned:
        word = answer.banned
        where = f" (in the function name {check.function})" if check.function and word in check.function else ""
        check.findings.append(Finding(
            PROTOCOL,
            f"{OFFICIALLY} scores 0: it contains {word!r}{where}, which is on the official blacklist, so "
            + ("no answer defining the function can pass" if where else "an answer written like it cannot pass"),
        ))
        return
    if "```" in reference:
        line = next(n for n, text in enumerate(reference.splitlines(), start=1) if "```" in text)
        check.findings.append(Finding(
            PROTOCOL,
            f"{OFFICIALLY} fails: the official grader cuts an answer at its first ``` (the reference has one at "
            f"line {line}), so an answer written like it cannot pass; write it without three backticks in a row",
        ))
        return
    own = {test.name: test for test in self_run.tests}
    failing = []
    for test in answer.tests:
        if test.passed:
            continue
        mine = own.get(test.name)
        why = test.error or (f"gave {_clip(test.actual or '')}, expected {_clip(test.expected or '')}")
        if mine is not None and not mine.passed and "NameError" not in why + (mine.error or ""):
            continue  # the reference fails this test itself: reported above
        failing.append((test, why))
    if not failing:
        return
    test, why = failing[0]
    hint = f" ({SCOPING_HINT})" if any("NameError" in w for _, w in failing) else ""
    names = _tests_phrase([t.name for t, _ in failing])
    check.findings.append(Finding(PROTOCOL, f"{OFFICIALLY} fails {names}; e.g. {why}, for {test.call[:80]}{hint}"))


def _tests_phrase(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    return f"{len(names)} tests ({shown})"


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _checks_of(spec: TaskSpec) -> str:
    """The checks its family names for a task (TaskFamily.task_checks); an unknown family's: the format only."""
    owner = family_registry().get(spec.family)
    return FORMAT if owner is None else owner.task_checks


def _check_duplicates(specs, checks, parsed, existing) -> None:
    by_reference: dict[str, str] = {}
    by_description: dict[str, str] = {}
    for spec in existing:
        if _checks_of(spec) != CODE:
            by_description.setdefault(_description_key(spec.problem_description), "a stored task")
            continue
        key = dedupe_key(spec.ground_truth)
        if key is not None:
            by_reference.setdefault(key, "a stored task")
        by_description.setdefault(_description_key(spec.problem_description), "a stored task")
    for i, spec in enumerate(specs):
        check = checks[i]
        if not isinstance(spec.problem_description, str):
            continue
        description = _description_key(spec.problem_description)
        key = parsed[i].dedupe_key if parsed[i] is not None else None
        if key is not None and key in by_reference:
            check.findings.append(Finding(DUPLICATES, f"same reference (up to formatting) as {by_reference[key]}"))
        elif description and description in by_description:
            check.findings.append(Finding(DUPLICATES, f"same description as {by_description[description]}"))
        if key is not None:
            by_reference.setdefault(key, check.label)
        if description:
            by_description.setdefault(description, check.label)


def _settle_rules(check: TaskCheck, spec: TaskSpec, parsed: _Parsed | None, ran: bool) -> None:
    levels: dict[str, str] = {}
    for finding in check.findings:
        if levels.get(finding.rule) != FAIL:
            levels[finding.rule] = finding.level
    if _checks_of(spec) != CODE:
        checked = {WELL_FORMED, DUPLICATES} | ({PROTOCOL, DETERMINISTIC} if check.rendered else set())
        check.rules = {rule: levels.get(rule, PASS if rule in checked else SKIP) for rule in RULES}
        return
    rules = {}
    for rule in RULES:
        if rule in levels:
            rules[rule] = levels[rule]
        elif rule in (DETERMINISTIC, PROTOCOL) and not ran:
            rules[rule] = SKIP  # the reference could not be run (see well-formed)
        elif rule == CLARIFICATION and check.naive_passes_all is None:
            rules[rule] = SKIP
        else:
            rules[rule] = PASS
    check.rules = rules


# ---------------------------------------------------------------- files


def validate_file(path, *, family: str = DEFAULT_FAMILY, **options) -> ValidationReport:
    """Validate a task JSONL file. A line that cannot be read (bad JSON, missing or
    mistyped fields) is a well-formed failure of that line, not an error of the file."""
    from pathlib import Path

    from colbench.errors import FormatError
    from colbench.families.records import task_from_record
    from colbench.jsonl import parse_record
    from colbench.official import read_text

    path = Path(path)
    text = read_text(path)
    specs, wheres, unreadable = [], [], []  # unreadable: (position, where, message)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            record = parse_record(line, where)
            spec = task_from_record(record, family=family, split="train", source=f"file:{path.name}", where=where)
        except FormatError as exc:
            message = str(exc)
            unreadable.append((len(specs) + len(unreadable), where,
                               message.split(": ", 1)[-1] if message.startswith(where) else message))
            continue
        specs.append(spec)
        wheres.append(where)
    report = validate_tasks(specs, where=wheres, **options)
    checks = list(report.checks)
    for position, where, message in unreadable:
        bad = TaskCheck(position, where, None, [Finding(WELL_FORMED, message)])
        bad.rules = {rule: FAIL if rule == WELL_FORMED else SKIP for rule in RULES}
        checks.insert(position, bad)
    for position, check in enumerate(checks):
        check.index = position
    return ValidationReport(checks, report.sandbox)
