#!/usr/bin/env python3
"""Reads strata-node's /metrics for the bench scripts: scrapes, and what a run added to a counter
or a histogram (the difference of two scrapes), with quantiles interpolated inside their bucket as
Prometheus's histogram_quantile does.

  prom.py scrape PORT                         the exposition text, on stdout
  prom.py counter BEFORE AFTER NAME [L=V ...] the sample's increase, e.g. strata_log_fsyncs_total
  prom.py hist BEFORE AFTER NAME [L=V ...]    "count mean_us p50_us p99_us" of histogram NAME
                                              (base name, seconds; e.g. strata_log_fsync_duration_seconds)
  prom.py buckets BEFORE AFTER NAME [L=V ...] one line "le=count ..." of histogram NAME's buckets'
                                              increase (cumulative, as exported), for `dist`
  prom.py dist [--us|--whole] FILE            the distribution of the `buckets` lines in FILE summed
                                              (e.g. one per timed run): "n=count p10 p50 p90 p99
                                              max<=bound | <=bound:share ...", shares of the events per
                                              non-empty bucket; --us: bounds in seconds shown in us;
                                              --whole: percentiles of whole things (records) rounded up.
                                              A line may add "max=V", the largest event seen (e.g.
                                              strata_group_commit_max_records): percentiles are then
                                              capped at it and "max=V" shows the largest of them
BEFORE and AFTER are files written by `scrape`; a missing BEFORE counts as all zero. Labels select
one series (tier=ram). A histogram with no events in between prints "0 - - -" (dist: "n=0").
"""
import math
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


def increase(before, after, name, want):
    """(bounds, cumulative counts) of what histogram `name` counted between the two scrapes."""
    def buckets(s):
        out = {}
        for labels, v in select(s, name + '_bucket', want).items():
            le = float(dict(labels)['le'])  # float('+Inf') is inf
            out[le] = out.get(le, 0.0) + v
        return out

    a, b = buckets(after), buckets(before)
    bounds = sorted(a)
    return bounds, [a[le] - b.get(le, 0.0) for le in bounds]


def hist(before, after, name, want):
    bounds, cumulative = increase(before, after, name, want)
    count = cumulative[-1] if cumulative else 0
    if count <= 0:
        return '0 - - -'
    total = counter(before, after, name + '_sum', want)
    us = lambda seconds: f'{seconds * 1e6:.1f}'
    return (f'{count:.0f} {us(total / count)} {us(quantile(0.5, bounds, cumulative))} '
            f'{us(quantile(0.99, bounds, cumulative))}')


def number(v):
    """A figure short: whole from 100 up, one decimal below."""
    if v == float('inf'):
        return 'inf'
    return f'{v:.0f}' if abs(v) >= 100 or v == int(v) else f'{v:.1f}'


def dist(path, scale, whole):
    """The summed `buckets` lines of `path`, as one line (see the module's help)."""
    total, largest = {}, None
    for line in open(path):
        for item in line.split():
            le, n = item.split('=')
            if le == 'max':
                largest = max(float(n), largest or 0.0)
                continue
            total[float(le)] = total.get(float(le), 0.0) + float(n)
    bounds = sorted(total)
    cumulative = [total[le] for le in bounds]
    count = cumulative[-1] if cumulative else 0
    if count <= 0:
        return 'n=0'
    shown = [le * scale for le in bounds]
    # Interpolation can go past the largest event in its bucket: no percentile above it.
    at = lambda q: min(quantile(q, shown, cumulative), largest if largest is not None else float('inf'))
    # Interpolation puts 1-record flushes at 0.5 (the first bucket starts at 0): whole things round up.
    percentiles = ' '.join(f'p{round(q * 100)} {number(math.ceil(at(q)) if whole else at(q))}'
                           for q in (0.1, 0.5, 0.9, 0.99))
    shares, below, top = [], 0.0, None
    for le, n in zip(shown, cumulative):
        if n > below:
            share = (n - below) / count * 100
            bound = f'>{number(shown[-2])}' if le == float('inf') and len(shown) > 1 else f'<={number(le)}'
            shown_share = f'{share:.0f}%' if share >= 1 else f'{share:.1f}%' if share >= 0.1 else '<0.1%'
            shares.append(f'{bound}:{shown_share}')
            top = bound
        below = n
    top = f'={number(largest)}' if largest is not None else top
    return f'n={count:.0f} {percentiles} max{top} | {" ".join(shares)}'


def main(argv):
    if len(argv) >= 2 and argv[0] == 'dist':
        flag = argv[1] if argv[1] in ('--us', '--whole') else None
        print(dist(argv[-1], 1e6 if flag == '--us' else 1, flag == '--whole'))
        return 0
    if len(argv) >= 2 and argv[0] == 'scrape':
        with urllib.request.urlopen(f'http://127.0.0.1:{argv[1]}/metrics', timeout=10) as r:
            sys.stdout.write(r.read().decode())
        return 0
    if len(argv) >= 4 and argv[0] in ('counter', 'hist', 'buckets'):
        before, after = samples(argv[1]), samples(argv[2])
        want = frozenset(tuple(kv.split('=', 1)) for kv in argv[4:])
        if argv[0] == 'counter':
            print(f'{counter(before, after, argv[3], want):.0f}')
        elif argv[0] == 'hist':
            print(hist(before, after, argv[3], want))
        else:
            bounds, cumulative = increase(before, after, argv[3], want)
            print(' '.join(f'{le!r}={n:.0f}' for le, n in zip(bounds, cumulative)))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
