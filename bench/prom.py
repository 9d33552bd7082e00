#!/usr/bin/env python3
"""Reads strata-node's /metrics for the bench scripts: scrapes, and what a run added to a counter
or a histogram (the difference of two scrapes), with quantiles interpolated inside their bucket as
Prometheus's histogram_quantile does.

  prom.py scrape PORT                         the exposition text, on stdout
  prom.py counter BEFORE AFTER NAME [L=V ...] the sample's increase, e.g. strata_log_fsyncs_total
  prom.py hist BEFORE AFTER NAME [L=V ...]    "count mean_us p50_us p99_us" of histogram NAME
                                              (base name, seconds; e.g. strata_log_fsync_duration_seconds)
BEFORE and AFTER are files written by `scrape`; a missing BEFORE counts as all zero. Labels select
one series (tier=ram). A histogram with no events in between prints "0 - - -".
"""
import re
import sys
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(path):
    """{(name, frozenset(labels)): value} of an exposition file (empty if absent)."""
    out = {}
    try:
        text = open(path).read()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m or line.startswith('#'):
            continue
        labels = frozenset(LABEL.findall(m.group(2) or ''))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def select(s, name, want):
    """The series of `name` whose labels include `want`, as {labels: value}."""
    return {labels: v for (n, labels), v in s.items() if n == name and want <= labels}


def counter(before, after, name, want):
    a, b = select(after, name, want), select(before, name, want)
    return sum(a.values()) - sum(b.values())


def quantile(q, bounds, cumulative):
    """histogram_quantile over (le, cumulative count) pairs sorted by le."""
    total = cumulative[-1]
    rank = q * total
    lo, below = 0.0, 0.0
    for le, n in zip(bounds, cumulative):
        if n >= rank and n > below:
            if le == float('inf'):
                return lo  # past the last bound: report it, as Prometheus does
            return lo + (le - lo) * (rank - below) / (n - below)
        lo, below = le, n
    return lo


def hist(before, after, name, want):
    def buckets(s):
        out = {}
        for labels, v in select(s, name + '_bucket', want).items():
            le = float(dict(labels)['le'])  # float('+Inf') is inf
            out[le] = out.get(le, 0.0) + v
        return out

    a, b = buckets(after), buckets(before)
    bounds = sorted(a)
    cumulative = [a[le] - b.get(le, 0.0) for le in bounds]
    count = cumulative[-1] if cumulative else 0
    if count <= 0:
        return '0 - - -'
    total = counter(before, after, name + '_sum', want)
    us = lambda seconds: f'{seconds * 1e6:.1f}'
    return (f'{count:.0f} {us(total / count)} {us(quantile(0.5, bounds, cumulative))} '
            f'{us(quantile(0.99, bounds, cumulative))}')


def main(argv):
    if len(argv) >= 2 and argv[0] == 'scrape':
        with urllib.request.urlopen(f'http://127.0.0.1:{argv[1]}/metrics', timeout=10) as r:
            sys.stdout.write(r.read().decode())
        return 0
    if len(argv) >= 4 and argv[0] in ('counter', 'hist'):
        before, after = samples(argv[1]), samples(argv[2])
        want = frozenset(tuple(kv.split('=', 1)) for kv in argv[4:])
        if argv[0] == 'counter':
            print(f'{counter(before, after, argv[3], want):.0f}')
        else:
            print(hist(before, after, argv[3], want))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
