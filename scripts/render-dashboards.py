#!/usr/bin/env python3
"""Renders the main panels of dashboards/strata-overview.json as PNG images from a Prometheus:
each panel's queries as range queries, plotted with matplotlib, one PNG per panel plus
overview.png with all of them. Run by `scripts/check-dashboards.sh --render DIR` (see `make
dashboards-png`), which provides a Prometheus that scraped a strata-node under load.

    render-dashboards.py --prometheus URL --start UNIX --end UNIX --var NAME=VALUE... --out DIR
"""

import argparse
import json
import math
import re
import sys
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The overview's panels, in dashboard order, that a reader needs first.
MAIN_PANELS = [
    "Operations per second by command",
    "Hit ratio",
    "Command latency p50 / p99 / p99.9",
    "Memory used vs maxmemory",
    "Evictions and expirations per second",
    "Connections",
    "Network traffic",
    "Keys",
]


def range_query(prom, expr, start, end, step):
    params = {"query": expr, "start": start, "end": end, "step": step}
    with urllib.request.urlopen(f"{prom}/api/v1/query_range?" + urllib.parse.urlencode(params), timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body.get('error')}")
    return body["data"]["result"]


def substitute(expr, values):
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    return expr


def legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt) or json.dumps(labels)


def human(value, unit):
    if value is None or math.isnan(value):
        return ""
    if unit == "bytes":
        for div, suffix in [(2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")]:
            if abs(value) >= div:
                return f"{value / div:.1f} {suffix}"
        return f"{value:.0f} B"
    if unit == "Bps":
        return human(value, "bytes") + "/s"
    if unit == "s":
        if abs(value) < 1e-3:
            return f"{value * 1e6:.0f} µs"
        if abs(value) < 1:
            return f"{value * 1e3:.1f} ms"
        return f"{value:.2f} s"
    if unit == "percentunit":
        return f"{value * 100:.0f}%"
    suffix = {"ops": " ops/s", "cps": "/s"}.get(unit, "")
    for div, s in [(1e6, "M"), (1e3, "k")]:
        if abs(value) >= div:
            return f"{value / div:.1f}{s}{suffix}"
    return f"{value:.0f}{suffix}" if abs(value) >= 10 or value == 0 else f"{value:.2f}{suffix}"


def plot(ax, panel, prom, values, start, end, step):
    unit = panel["fieldConfig"]["defaults"].get("unit", "short")
    lines = 0
    for t in panel["targets"]:
        expr = substitute(t["expr"], values)
        for series in range_query(prom, expr, start, end, step):
            xs = [datetime.fromtimestamp(float(v[0])) for v in series["values"]]
            ys = [float(v[1]) for v in series["values"]]
            if all(math.isnan(y) for y in ys):
                continue
            ax.plot(xs, ys, linewidth=1.3, label=legend(t.get("legendFormat", ""), series["metric"]))
            lines += 1
    for step_ in panel["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [])[1:]:
        if step_["value"] is not None and unit in ("s", "percentunit"):
            ax.axhline(step_["value"], color=step_["color"], linestyle="--", linewidth=0.8, alpha=0.7)
    ax.set_title(panel["title"], fontsize=10, loc="left")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v, unit)))
    if unit == "s":
        ax.set_yscale("log")
    if unit == "percentunit":
        ax.set_ylim(0, 1.05)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%H:%M:%S"))
    if lines:
        ax.legend(fontsize=6, loc="upper left", ncol=2 if lines > 4 else 1, framealpha=0.7)
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--start", type=float, required=True)
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--step", default="2s")
    ap.add_argument("--var", action="append", default=[])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    prom = args.prometheus.rstrip("/")
    values = dict(v.split("=", 1) for v in args.var)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    board = json.loads((ROOT / "dashboards/strata-overview.json").read_text())
    by_title = {p["title"]: p for p in board["panels"] if p["type"] != "row"}
    missing = [t for t in MAIN_PANELS if t not in by_title]
    if missing:
        print(f"render-dashboards: no panel {missing} in the overview", file=sys.stderr)
        return 1

    empty = []
    cols = 2
    rows = math.ceil(len(MAIN_PANELS) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(14, 3.1 * rows), constrained_layout=True)
    fig.suptitle(f"{board['title']} — {values.get('cluster', '')} under redis-benchmark load", fontsize=12)
    for i, title in enumerate(MAIN_PANELS):
        panel = by_title[title]
        if plot(axes[i // cols][i % cols], panel, prom, values, args.start, args.end, args.step) == 0:
            empty.append(title)
        single, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
        plot(ax, panel, prom, values, args.start, args.end, args.step)
        name = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        single.savefig(out / f"{name}.png", dpi=100)
        plt.close(single)
    fig.savefig(out / "overview.png", dpi=80)
    print(f"render-dashboards: wrote {len(MAIN_PANELS)} panels and overview.png to {out}")
    if empty:
        print(f"render-dashboards: panels without data: {empty}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
