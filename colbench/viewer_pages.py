"""The viewer's pages: plain HTML from the store's rows, every stored text escaped.

Dialogues hold model-written text (frontend answers are whole HTML pages) and a policy
under optimisation pressure may write anything, so nothing from the store is ever
markup: it is escaped and shown in <pre>. Pages load nothing from outside (no fonts,
scripts or stylesheets beyond the inline ones), and the server's Content-Security-Policy
forbids it anyway.
"""
from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from colbench.families import names as family_names
from colbench.runs import headline, labelled, named, progress, what

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:baseline}
header a{color:#fff;text-decoration:none;font-weight:600}main{padding:16px 20px}
table{border-collapse:collapse;background:#fff;width:100%;margin:8px 0 16px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}th{background:#eaeef2}
td.n{text-align:right;font-variant-numeric:tabular-nums}form{margin:8px \
0;display:flex;gap:8px;flex-wrap:wrap;align-items:end}
label{display:flex;flex-direction:column;font-size:12px;color:#57606a}input,select{font:inherit;padding:2px 4px}
.turn{background:#fff;border:1px solid #d0d7de;border-left:5px solid #0969da;margin:10px 0;padding:8px 12px}
.turn.user{border-left-color:#1a7f37}.turn h3{margin:0 0 6px;font-size:13px;color:#57606a}
.answer{border-left-color:#8250df}pre{white-space:pre-wrap;word-break:break-word;margin:0;font:12.5px/1.4 \
ui-monospace,monospace}
.ok{color:#1a7f37}.bad{color:#cf222e}.dim{color:#57606a}.score{font-weight:600}
.pages{display:flex;gap:12px;margin-top:8px}.pages figure{margin:0}.pages img{width:420px;border:1px solid \
#d0d7de;background:#000}
figcaption{font-size:12px;color:#57606a}.facts td:first-child{width:160px;color:#57606a}svg{background:#fff;border:1px \
solid #d0d7de}
"""


def page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)} ·"
        f" colbench</title><style>{STYLE}</style></head><body><header><a href='/'>colbench</a><a href='/'>runs</a><a"
        " href='/trajectories'>trajectories</a><span"
        f" class=dim>{escape(title)}</span></header><main>{body}</main></body></html>"
    )


def link(href: str, text: str) -> str:
    return f"<a href='{escape(href, quote=True)}'>{escape(text)}</a>"


def table(headers: list[str], rows: list[list[str]], numeric: set[int] = frozenset(), id_: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td class=n>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table{f' id={id_}' if id_ else ''}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def filters(fields: list[tuple[str, str, list[str] | None]], values: dict) -> str:
    """A GET form: (name, label, choices or None for free text)."""
    parts = []
    for name, label, choices in fields:
        current = values.get(name, "")
        if choices is None:
            control = f"<input name={name} value='{escape(current, quote=True)}'>"
        else:
            options = "".join((
                "<option"
                f" value='{escape(c, quote=True)}'{' selected' if c == current else ''}>{escape(c or 'any')}</option>"
            ) for c in choices)
            control = f"<select name={name}>{options}</select>"
        parts.append(f"<label>{escape(label)}{control}</label>")
    return f"<form method=get>{''.join(parts)}<button type=submit>filter</button></form>"


def figure(value) -> str:
    return "" if value is None else f"{value:.3f}"


# ---------------------------------------------------------------- runs


def runs_page(rows: list[dict], values: dict) -> str:
    form = filters([("kind", "kind", ["", "rollout", "train", "eval"]), ("tag", "tag", None)], values)
    body = []
    for row in rows:
        body.append([link(f"/run/{row['ref']}", row["ref"]), escape(row["name"] or ""), escape(", ".join(row["tags"])),
                     escape(what(row)),
                     escape(row.get("tasks", "")), escape(progress(row)), escape(headline(row)),
                     escape(str(row["created_at"])[:16])])
    listing = (
        table(["run", "name", "tags", "what", "tasks", "status", "result", "created"], body, id_="runs")
        if rows
        else "<p>no runs match</p>"
    )
    return page("runs", f"<h2>runs ({len(rows)})</h2>{form}{listing}")


def sparkline_svg(values: list[float], width: int = 320, height: int = 60) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = width / max(len(values) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 4 - (v - low) / span * (height - 8):.1f}" for i, v in enumerate(values)
    )
    return (
        f"<svg width={width} height={height} role=img><polyline fill=none stroke='#0969da' stroke-width=1.5"
        f" points='{points}'/></svg>"
    )


def run_page(run: dict) -> str:
    title = named(run["ref"], run.get("name"))
    facts = [
        (k, run.get(k))
        for k in (
            "status", "tasks", "policy", "setting", "simulator", "what", "base_model", "parent", "error", "created_at",
            "finished_at"
        )
    ]
    facts.append(("tags", ", ".join(run.get("tags") or [])))
    rows = [[escape(k), escape(str(v))] for k, v in facts if v not in (None, "", [])]
    body = [(
        f"<h2>{escape(title)}</h2><table"
        f" class=facts>{''.join(f'<tr><td>{a}</td><td>{b}</td></tr>' for a, b in rows)}</table>"
    )]
    if run["kind"] == "rollout":
        counts = ", ".join(f"{n} {s}" for s, n in run["by_status"].items() if n)
        body.append(
            f"<p>{escape(counts)} · {link('/trajectories?' + urlencode({'run': run['ref']}), 'its trajectories')}</p>"
        )
        if run.get("trained"):
            body.append("<p>trained: " + ", ".join(link(f"/run/{ref}", ref) for ref in run["trained"]) + "</p>")
    for item in run.get("data") or []:
        body.append(
            f"<p>trained on {item['trajectories']} trajectories of {link('/run/' + item['rollout'], item['rollout'])}"
            f"{escape(' (' + item['name'] + ')') if item.get('name') else ''}</p>"
        )
    steps = run.get("steps") or []
    if steps:
        from colbench.curves import curve_names

        curves = []
        for name in curve_names(steps):
            values = [s[name] for s in steps if isinstance(s.get(name), (int, float))]
            if values:
                curves.append([escape(name), f"{values[0]:.4g}", f"{values[-1]:.4g}", sparkline_svg(values)])
        body.append(f"<h3>per step ({len(steps)} steps)</h3>" + table(["figure", "first", "last", "curve"], curves,
                                                                      {1, 2}, id_="curves"))
    config = run.get("config") or run.get("metrics") or {}
    if config:
        body.append("<h3>settings</h3>" + table(["setting", "value"],
                                                [[escape(str(k)), escape(str(v))] for k, v in config.items()]))
    return page(title, "".join(body))


# ---------------------------------------------------------------- trajectories


TRAJECTORY_FILTERS = [("run", "run", None), ("policy", "policy", None),
                      ("status", "status", ["", "done", "failed", "running", "pending"]),
                      ("family", "family", ["", *family_names()]), ("split", "split", None), ("task", "task id", None),
                      ("min_reward", "min reward", None), ("max_reward", "max reward", None)]


def trajectories_page(rows, values: dict, *, offset: int, limit: int) -> str:
    body = []
    for trajectory, task, agent_turns in rows:
        success = (
            ""
            if trajectory.success is None
            else ("<span class=ok>✓</span>" if trajectory.success else "<span class=bad>✗</span>")
        )
        body.append(
            [
                link(f"/trajectory/{trajectory.id}", str(trajectory.id)),
                f"{task.id} {escape(task.family)}/{escape(task.split)}",
                (
                    link(f"/run/rollout:{trajectory.rollout_id}", f"rollout:{trajectory.rollout_id}")
                    if trajectory.rollout_id
                    else ""
                ),
                escape(labelled(trajectory.policy, trajectory.setting)),
                str(trajectory.sample_index),
                escape(trajectory.status),
                str(agent_turns),
                figure(trajectory.reward),
                success
            ]
        )
    listing = table(["id", "task", "run", "policy", "#", "status", "turns", "reward", "success"], body, {0, 4, 6, 7},
                    id_="trajectories")
    more = ""
    if len(rows) == limit:
        more = link("/trajectories?" + urlencode({k: v for k, v in values.items() if v} | {"offset": offset + limit}),
                    "next page →")
    shown = listing if rows else "<p>no trajectories match</p>"
    return page("trajectories", f"<h2>trajectories</h2>{filters(TRAJECTORY_FILTERS, values)}{shown}{more}")


def dialogue_page(trajectory, task, turns, tests, scores: dict) -> str:
    """One dialogue: header, every turn (critic scores and, for frontend, the page it showed beside
    the reference), the graded answer, the test results."""
    outcome = (
        ""
        if trajectory.success is None
        else ("<span class=ok>success</span>" if trajectory.success else "<span class=bad>not solved</span>")
    )
    facts = [
        ("task", f"{task.id} ({task.family}/{task.split}, {task.source})"),
        ("policy", trajectory.policy),
        ("setting", trajectory.setting),
        ("simulator", trajectory.simulator),
        ("sample", str(trajectory.sample_index)),
        ("status", trajectory.status),
        (
            "reward",
            (
                f"{figure(trajectory.reward)} ({trajectory.reward_metric})"
                if trajectory.reward is not None
                else "not graded"
            )
        ),
        ("failure", trajectory.failure)
    ]
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>" for k, v in facts if v)
    run = (
        f" · {link(f'/run/rollout:{trajectory.rollout_id}', f'rollout:{trajectory.rollout_id}')}"
        if trajectory.rollout_id
        else ""
    )
    body = [f"<h2>trajectory {trajectory.id} {outcome}{run}</h2><table class=facts>{rows}</table>"]
    agent = 0
    for turn in turns:
        if turn.role == "assistant":
            agent += 1
            details = [f"{turn.completion_tokens} tokens" if turn.completion_tokens else "",
                       f"latency {turn.latency_s:.2f}s" if turn.latency_s is not None else ""]
            marks = "".join((
                f" · <span class='score {'ok' if s > 0.05 else 'bad' if s < -0.05 else 'dim'}'>critic ckpt:{c}"
                f" {s:+.4f}</span>"
            ) for c, s in scores.get(turn.id, []))
            head = f"agent · turn {agent}" + "".join(f" · {escape(d)}" for d in details if d) + marks
            pages = ""
            if turn.screenshot:
                shown = (
                    f"<figure><img alt='page shown' src='/screenshot/{escape(turn.screenshot)}'><figcaption>the page"
                    " this turn showed</figcaption></figure>"
                )
                reference = (
                    f"<figure><img alt='reference' src='/reference/{task.id}.png'><figcaption>the reference"
                    " page</figcaption></figure>"
                )
                pages = f"<div class=pages>{shown}{reference}</div>"
            body.append(f"<div class='turn agent'><h3>{head}</h3><pre>{escape(turn.content)}</pre>{pages}</div>")
        else:
            title = "human · task description" if turn.index == 0 else "human"
            error = f" · <span class=bad>{escape(turn.error)}</span>" if turn.error else ""
            body.append(f"<div class='turn user'><h3>{title}{error}</h3><pre>{escape(turn.content)}</pre></div>")
    if trajectory.answer is not None:
        body.append(f"<div class='turn answer'><h3>graded answer</h3><pre>{escape(trajectory.answer)}</pre></div>")
    if tests:
        rows = [
            [
                escape(r.name),
                escape(r.call),
                escape(r.expected or ""),
                escape(r.actual or ""),
                "<span class=ok>pass</span>" if r.passed else f"<span class=bad>{escape(r.error or 'fail')}</span>"
            ]
            for r in tests
        ]
        body.append("<h3>test results</h3>" + table(["test", "call", "expected", "actual", "result"], rows,
                                                    id_="tests"))
    return page(f"trajectory {trajectory.id}", "".join(body))


def not_found(what: str) -> str:
    return page("not found", f"<h2>not found</h2><p>{escape(what)}</p>")
