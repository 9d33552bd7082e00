#!/usr/bin/env python3
"""Evaluates every PromQL expression of dashboards/*.json and dashboards/strata.rules.yaml against a
running Prometheus, and lints real scrapes with `promtool check metrics`. Run by
scripts/check-dashboards.sh, which starts that Prometheus, a loaded strata-node and a strata-operator.

Fails (exit 1) when a query errors, returns no series, or returns only NaN (a panel showing nothing);
when a rule's expression (its comparisons made `bool`, so a healthy system still returns series)
returns nothing; when a strata_* metric a rule names is unknown to Prometheus; when Prometheus
reports a rule unhealthy; or when promtool rejects a scrape.
"""

import argparse
import json
import math
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def query(prom, expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    if body.get("status") != "success":
        return None, f"{body.get('errorType')}: {body.get('error')}"
    return body["data"], None


def get(prom, path):
    with urllib.request.urlopen(prom + path, timeout=20) as r:
        return json.load(r)["data"]


def panels(board):
    for p in board.get("panels", []):
        yield p
        yield from p.get("panels", [])


def substitute(expr, values):
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    return expr


def series_values(data):
    kind, result = data["resultType"], data["result"]
    if kind == "vector":
        return [float(s["value"][1]) for s in result]
    if kind == "matrix":
        return [float(v[1]) for s in result for v in s["values"]]
    if kind == "scalar":
        return [float(result[1])]
    return []


def check_expr(prom, what, expr, failures, allow_nan=False):
    data, err = query(prom, expr)
    if err:
        failures.append(f"{what}: query error {err}\n    {expr}")
        return None
    values = series_values(data)
    if not values:
        failures.append(f"{what}: no series\n    {expr}")
        return None
    if not allow_nan and all(math.isnan(v) for v in values):
        failures.append(f"{what}: only NaN\n    {expr}")
        return None
    return values


COMPARISON = re.compile(r"(==|!=|>=|<=|>|<)")


def comparisons_to_bool(expr):
    """`a > 0.9` filters; `a > bool 0.9` returns 0/1 for every series of `a`. Comparisons inside
    label matchers ({...}) and strings are left alone."""
    out, i, depth, quote = [], 0, 0, None
    while i < len(expr):
        c = expr[i]
        if quote:
            out.append(c)
            if c == "\\":
                out.append(expr[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "\"'`":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0:
            m = COMPARISON.match(expr, i)
            if m:
                op = m.group(1)
                rest = expr[m.end():]
                out.append(op)
                if not re.match(r"\s*bool\b", rest):
                    out.append(" bool")
                i = m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def openmetrics_to_text(text):
    """promtool 2.42 reads only the text format 0.0.4. Same samples; the OpenMetrics-only parts
    rewritten: `# UNIT`/`# EOF` dropped, counter families named with their `_total` suffix, the
    `info` type as the gauge `<name>_info`."""
    out = []
    for line in text.splitlines():
        if line.startswith("# UNIT ") or line == "# EOF":
            continue
        m = re.match(r"# (TYPE|HELP) (\S+) (.*)$", line)
        if m:
            kind, name, rest = m.groups()
            if kind == "TYPE" and rest == "info":
                name, rest = name + "_info", "gauge"
            elif kind == "TYPE" and rest == "counter" and not name.endswith("_total"):
                name += "_total"
            out.append(f"# {kind} {name} {rest}")
            continue
        out.append(line)
    # HELP lines come before TYPE and need the same rename: redo them from the TYPE that follows.
    fixed = []
    for i, line in enumerate(out):
        m = re.match(r"# HELP (\S+) (.*)$", line)
        if m and i + 1 < len(out):
            t = re.match(r"# TYPE (\S+) ", out[i + 1])
            if t and t.group(1).startswith(m.group(1)):
                line = f"# HELP {t.group(1)} {m.group(2)}"
        fixed.append(line)
    return "\n".join(fixed) + "\n"


def promtool_metrics(name, url, failures):
    with urllib.request.urlopen(url, timeout=10) as r:
        scrape = r.read().decode()
    text = openmetrics_to_text(scrape)
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    samples = sum(1 for l in text.splitlines() if l and not l.startswith("#"))
    if p.returncode != 0:
        failures.append(f"promtool check metrics on the {name} scrape ({url}):\n{p.stdout}{p.stderr}")
    else:
        print(f"  ok  promtool check metrics: {name} scrape, {samples} samples")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--var", action="append", default=[], help="NAME=VALUE for a dashboard variable")
    ap.add_argument("--rules", default=str(ROOT / "dashboards/strata.rules.yaml"))
    ap.add_argument("--scrape", action="append", default=[], help="NAME=URL of a /metrics to lint")
    ap.add_argument(
        "--idle-ok",
        action="append",
        default=[],
        help="METRIC whose quantiles may be NaN here (its series exist but saw no events, e.g. cold-tier "
        "reads on a cluster whose data fits in RAM); errors and missing series still fail",
    )
    args = ap.parse_args()
    prom = args.prometheus.rstrip("/")
    values = dict(v.split("=", 1) for v in args.var)
    failures = []
    checked = 0

    for path in sorted((ROOT / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        for var in board.get("templating", {}).get("list", []):
            if var.get("type") != "query":
                continue
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q.strip())
            if not m:
                failures.append(f"{path.name} variable {var['name']}: not label_values(metric, label): {q}")
                continue
            selector, label = substitute(m.group(1), values), m.group(2)
            data, err = query(prom, f"group by ({label}) ({selector})")
            found = sorted(s["metric"].get(label, "") for s in (data or {}).get("result", []))
            checked += 1
            if err or not [f for f in found if f]:
                failures.append(f"{path.name} variable ${var['name']}: no {label} values ({err or 'empty'}): {q}")
            else:
                print(f"  ok  {path.name} ${var['name']}: {', '.join(found)}")
        for p in panels(board):
            for t in p.get("targets", []):
                expr = substitute(t["expr"], values)
                what = f"{path.name} panel {p['title']!r} {t['refId']}"
                idle_ok = any(m in expr for m in args.idle_ok)
                v = check_expr(prom, what, expr, failures, allow_nan=idle_ok)
                checked += 1
                if v is not None:
                    finite = [x for x in v if not math.isnan(x)]
                    last = f"last max {max(finite):.6g}" if finite else "all NaN (no events; allowed by --idle-ok)"
                    print(f"  ok  {what}: {len(v)} values, {last}")
            if not p.get("targets") and p["type"] != "row":
                failures.append(f"{path.name} panel {p['title']!r}: no query")
            if p["type"] != "row" and not p.get("description"):
                failures.append(f"{path.name} panel {p['title']!r}: no description")
            if p["type"] != "row" and not p.get("fieldConfig", {}).get("defaults", {}).get("unit"):
                failures.append(f"{path.name} panel {p['title']!r}: no unit")

    names = set(get(prom, "/api/v1/label/__name__/values"))
    rules = yaml.safe_load(Path(args.rules).read_text())
    rule_names = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            rule_names.append(name)
            for metric in sorted(set(re.findall(r"\b(strata_[a-z0-9_]+)", rule["expr"]))):
                if metric not in names:
                    failures.append(f"rule {name}: metric {metric} unknown to Prometheus")
            expr = comparisons_to_bool(rule["expr"])
            v = check_expr(prom, f"rule {name}", expr, failures, allow_nan=True)
            checked += 1
            if v is not None:
                firing = "condition true now" if any(x == 1 for x in v) else "condition false now"
                print(f"  ok  rule {name}: {len(v)} series ({firing})")

    # Prometheus loaded the same file: every rule evaluated without error.
    loaded = {r["name"]: r for g in get(prom, "/api/v1/rules")["groups"] for r in g["rules"]}
    for name in rule_names:
        r = loaded.get(name)
        if r is None:
            failures.append(f"rule {name}: not loaded by Prometheus")
        elif r.get("health") != "ok" or r.get("lastError"):
            failures.append(f"rule {name}: Prometheus reports health {r.get('health')!r} {r.get('lastError', '')}")
        else:
            print(f"  ok  rule {name}: Prometheus evaluates it, state {r.get('state')}")

    for scrape in args.scrape:
        name, url = scrape.split("=", 1)
        promtool_metrics(name, url, failures)

    if failures:
        print(f"\ncheck-dashboards: {len(failures)} of {checked} checks failed:", file=sys.stderr)
        for f in failures:
            print(f"  FAIL {f}", file=sys.stderr)
        return 1
    print(f"check-dashboards: {checked} queries and variables return data; {len(rule_names)} rules healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
