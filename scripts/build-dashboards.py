#!/usr/bin/env python3
"""Writes the Grafana dashboards under dashboards/ from the panel list below, so every panel has
the same datasource, variables, units, thresholds and description conventions.

    scripts/build-dashboards.py           (re)write dashboards/*.json
    scripts/build-dashboards.py --check   exit 1 when a committed dashboard differs from a fresh build

Every query uses only metrics that strata-node or strata-operator export, with the labels the
operator's ServiceMonitor gives their targets: `namespace`, `pod`, and `cachecluster` (the
CacheCluster's name, relabelled from the pods' `app.kubernetes.io/instance` label).
scripts/check-dashboards.sh evaluates every one of them against a real Prometheus.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "dashboards"

# Grafana 10.4 / 11.x.
SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}

# Label matchers of the variables, for node metrics.
NODE = 'namespace=~"$namespace", cachecluster=~"$cluster", pod=~"$pod"'
# For the operator's per-CacheCluster series (no pod: the operator reports them).
CLUSTER = 'namespace=~"$namespace", cachecluster=~"$cluster"'
RATE = "$__rate_interval"

GREEN, YELLOW, RED = "green", "#EAB839", "red"


def thresholds(*steps):
    """steps: (value, color) after the base color, e.g. thresholds(GREEN, (0.9, YELLOW))."""
    base, rest = steps[0], steps[1:]
    return {
        "mode": "absolute",
        "steps": [{"color": base, "value": None}] + [{"color": c, "value": v} for v, c in rest],
    }


class Board:
    def __init__(self, uid, title, description, tags, variables):
        self.uid, self.title, self.description, self.tags = uid, title, description, tags
        self.variables = variables
        self.panels = []
        self.y = 0
        self.x = 0
        self.row_height = 0

    def row(self, title):
        self.newline()
        self.panels.append(
            {
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.y += 1

    def newline(self):
        if self.x:
            self.y += self.row_height
            self.x, self.row_height = 0, 0

    def panel(self, kind, title, description, targets, unit, thr, w=12, h=8, **extra):
        if self.x + w > 24:
            self.newline()
        defaults = {"unit": unit, "thresholds": thr, "color": {"mode": "palette-classic"}}
        if kind in ("stat", "gauge", "bargauge"):
            defaults["color"] = {"mode": "thresholds"}
        defaults.update(extra.pop("defaults", {}))
        # Instant queries: a table, or a panel of the latest values only (e.g. a topk, which over
        # a range would name other series at every step).
        instant = extra.pop("instant", kind == "table")
        panel = {
            "type": kind,
            "title": title,
            "description": description,
            "datasource": DS,
            "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
            "fieldConfig": {"defaults": defaults, "overrides": extra.pop("overrides", [])},
            "options": extra.pop("options", {}),
            "targets": [
                {
                    "datasource": DS,
                    "refId": chr(ord("A") + i),
                    "expr": expr,
                    "legendFormat": legend,
                    **({"instant": True, "range": False} if instant else {}),
                    **({"format": "table"} if kind == "table" else {}),
                    **({"format": "heatmap"} if kind == "heatmap" else {}),
                }
                for i, (expr, legend) in enumerate(targets)
            ],
        }
        if kind == "timeseries":
            panel["options"] = {
                "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                "tooltip": {"mode": "multi", "sort": "desc"},
                **panel["options"],
            }
            defaults.setdefault("custom", {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"})
            if thr["steps"][1:]:
                defaults["custom"]["thresholdsStyle"] = {"mode": "line"}
        if kind == "stat":
            panel["options"] = {
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "colorMode": "value",
                "graphMode": "area",
                "textMode": "auto",
                **panel["options"],
            }
        panel.update(extra)
        self.panels.append(panel)
        self.x += w
        self.row_height = max(self.row_height, h)

    def json(self):
        for i, p in enumerate(self.panels, start=1):
            p["id"] = i
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": self.tags,
            "editable": True,
            "graphTooltip": 1,
            "refresh": "30s",
            "schemaVersion": SCHEMA_VERSION,
            "time": {"from": "now-1h", "to": "now"},
            "timezone": "browser",
            "version": 1,
            "annotations": {"list": []},
            "links": [
                {"type": "dashboards", "tags": ["strata"], "asDropdown": True, "title": "Strata dashboards"}
            ],
            "templating": {"list": self.variables},
            "panels": self.panels,
        }


def datasource_var():
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
    }


def query_var(name, label, query, multi=True):
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": True,
        "allValue": ".*",
        "current": {},
        "hide": 0,
    }


def node_variables(pod=True):
    out = [
        datasource_var(),
        query_var("namespace", "Namespace", "label_values(strata_build_info, namespace)"),
        query_var("cluster", "CacheCluster", 'label_values(strata_build_info{namespace=~"$namespace"}, cachecluster)'),
    ]
    if pod:
        out.append(
            query_var(
                "pod",
                "Pod",
                'label_values(strata_build_info{namespace=~"$namespace", cachecluster=~"$cluster"}, pod)',
            )
        )
    return out


def quantile(q, by, selector, metric="strata_command_duration_seconds_bucket"):
    return f"histogram_quantile({q}, sum by ({by}) (rate({metric}{{{selector}}}[{RATE}])))"


def rate(metric, selector=NODE, by=None):
    inner = f"rate({metric}{{{selector}}}[{RATE}])"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


def hit_ratio(by):
    hits = rate("strata_keyspace_hits_total", by=by)
    misses = rate("strata_keyspace_misses_total", by=by)
    return f"{hits} / ({hits} + {misses})"


# Reads of cold values, each a hit served from the disk tier (pending, shared, sync).
COLD_READS = 'strata_tier_reads_total{kind=~"pending|shared|sync", ' + NODE + "}"


def cold_tier_panels(b, w):
    """The tier's two questions on the overview: where hits come from, and how full the disk is."""
    b.panel(
        "timeseries",
        "Hits from RAM vs disk",
        "Lookups that found their key, split by where the value was: in RAM, or on the node's disk tier "
        "(strata_tier_reads_total: cold values read back; every one of them is also a hit in "
        "strata_keyspace_hits_total). Disk hits are what the tier saves from being misses; many of them "
        "mean the hot set outgrew RAM. Nodes without a tier (max-disk 0) have RAM hits only.",
        [
            (
                f"{rate('strata_keyspace_hits_total')} - (sum(rate({COLD_READS}[{RATE}])) or vector(0))",
                "RAM",
            ),
            (f"sum(rate({COLD_READS}[{RATE}])) or vector(0)", "disk"),
        ],
        "ops",
        thresholds(GREEN),
        w=w,
    )
    b.panel(
        "timeseries",
        "Disk tier used vs budget",
        "Segment bytes the cold tier holds (strata_tier_disk_bytes) against its budget (strata_tier_max_disk_bytes, "
        "from max-disk: the CacheCluster's storage.diskBudget or a share of its volume). Near the budget the "
        "tier cleans segments and, when it must, evicts its oldest keys (strata_tier_evicted_keys_total).",
        [
            (f"strata_tier_disk_bytes{{{NODE}}}", "{{pod}} used"),
            (f"strata_tier_max_disk_bytes{{{NODE}}}", "{{pod}} budget"),
        ],
        "bytes",
        thresholds(GREEN),
        w=w,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*budget"},
                "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
            }
        ],
    )


def heatmap(b, title, description, metric, unit, w=8):
    """Flushes per second in each bucket of a node histogram over time (summed over the selected
    pods): the whole distribution, where a quantile shows one point of it."""
    b.panel(
        "heatmap",
        title,
        description,
        [(f"sum by (le) (rate({metric}{{{NODE}}}[{RATE}]))", "{{le}}")],
        unit,
        thresholds(GREEN),
        w=w,
        defaults={
            "custom": {
                "scaleDistribution": {"type": "linear"},
                "hideFrom": {"legend": False, "tooltip": False, "viz": False},
            }
        },
        options={
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential", "exponent": 0.5, "steps": 64,
                      "fill": "dark-orange", "reverse": False},
            "yAxis": {"axisPlacement": "left", "unit": unit},
            "rowsFrame": {"layout": "auto"},
            "cellValues": {"unit": "ops"},
            "filterValues": {"le": 1e-9},
            "tooltip": {"mode": "single", "yHistogram": True, "showColorScale": False},
            "legend": {"show": True},
            "exemplars": {"color": "rgba(255,0,255,0.7)"},
        },
    )


def durability_distribution_panels(b):
    """The Durability row's second line: the histograms behind its p50 / p99 panels, and the lag
    in time and bytes that write-back's and periodic's back-pressure bound."""
    b.newline()
    heatmap(
        b,
        "Group-commit size distribution",
        "Flushes per second by records made durable (buckets of the histogram strata_group_commit_records, "
        "powers of two from 1 to 65536; a row labelled N holds flushes of more than N/2 and at most N records). "
        "In sync mode the batch grows with the writers waiting for one fsync; in periodic with the writes of "
        "an interval.",
        "strata_group_commit_records_bucket",
        "short",
    )
    heatmap(
        b,
        "fsync latency distribution",
        "Flushes per second by their time, write and fdatasync (buckets of the histogram "
        "strata_log_fsync_duration_seconds, 10 µs to 1 s): a second band of slow flushes shows what p99 alone "
        "hides.",
        "strata_log_fsync_duration_seconds_bucket",
        "s",
    )
    b.panel(
        "timeseries",
        "Durability lag: age and bytes",
        "Age of the oldest acknowledged write not yet durable (strata_durability_lag_age_seconds) and the bytes "
        "appended but not yet durable (strata_durability_lag_bytes, right axis); both upper bounds. What a crash "
        "could lose in write-back and periodic; past --write-back-max-lag / -bytes (periodic: two intervals, "
        "8 MiB) replies wait for the flush. 0 in sync.",
        [
            (f"strata_durability_lag_age_seconds{{{NODE}}}", "{{pod}} age"),
            (f"strata_durability_lag_bytes{{{NODE}}}", "{{pod}} bytes"),
        ],
        "s",
        thresholds(GREEN, (1, YELLOW), (5, RED)),
        w=8,
        defaults={"min": 0},
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*bytes"},
                "properties": [
                    {"id": "unit", "value": "bytes"},
                    {"id": "custom.axisPlacement", "value": "right"},
                    {"id": "thresholds", "value": thresholds(GREEN)},
                ],
            }
        ],
    )


# Hash slots of Redis Cluster: a cluster is whole when its nodes serve all of them.
SLOTS = 16384
FORWARD_BUCKETS = "strata_cluster_forward_duration_seconds_bucket"


def top_slots_options():
    return {"orientation": "horizontal", "displayMode": "basic",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}


def cluster_overview_panels(b):
    """Cluster mode (nodes started with cluster-enabled yes export strata_cluster_*; others none)."""
    b.row("Cluster mode: slots and routing")
    b.panel(
        "timeseries",
        "Slots covered and owned",
        f"Hash slots some node serves, as each CacheCluster's nodes see their topology (the least of "
        f"strata_cluster_slots_covered over its pods), and the slots each pod serves "
        f"(strata_cluster_slots_owned). A whole cluster covers all {SLOTS}; below that (red) its data "
        f"commands get CLUSTERDOWN, and the alert StrataClusterSlotsUncovered fires. Owned slots are "
        f"spread evenly over the pods.",
        [
            (f"min by (cachecluster) (strata_cluster_slots_covered{{{NODE}}})", "{{cachecluster}} covered"),
            (f"strata_cluster_slots_owned{{{NODE}}}", "{{pod}} owned"),
        ],
        "short",
        thresholds(RED, (SLOTS, GREEN)),
        w=8,
        defaults={"min": 0, "max": SLOTS, "decimals": 0},
    )
    b.panel(
        "timeseries",
        "Topology epoch per pod",
        "Epoch of the topology each pod applied (strata_cluster_topology_epoch). The operator pushes every "
        "change with a higher epoch and waits for every pod: lines apart for long mean a pod missed a push; "
        "0 means a pod has no topology yet and answers CLUSTERDOWN (alert StrataClusterNoTopology).",
        [(f"strata_cluster_topology_epoch{{{NODE}}}", "{{pod}}")],
        "short",
        thresholds(GREEN),
        w=8,
        defaults={"min": 0, "decimals": 0},
    )
    b.panel(
        "timeseries",
        "Forwarded requests and MOVED replies",
        "Per CacheCluster and second: requests for another pod's slots that a pod forwarded to the owner "
        "for plain clients, the Service's port (strata_cluster_forwarded_total), those whose owner could not "
        "be reached (strata_cluster_forward_errors_total: the client got an error), and MOVED replies sent to "
        "cluster-aware clients on the direct port (strata_cluster_moved_total), which then go to the owner.",
        [
            (rate("strata_cluster_forwarded_total", by="cachecluster"), "{{cachecluster}} forwarded"),
            (rate("strata_cluster_forward_errors_total", by="cachecluster"), "{{cachecluster}} forward errors"),
            (rate("strata_cluster_moved_total", by="cachecluster"), "{{cachecluster}} MOVED"),
        ],
        "ops",
        thresholds(GREEN),
        w=8,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*forward errors"},
                "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": RED}}],
            }
        ],
    )
    b.panel(
        "timeseries",
        "Forwarding latency p50 / p99",
        "Time from sending a forwarded request to the owning pod to having its reply, from the histogram "
        "strata_cluster_forward_duration_seconds (buckets 0.5 µs to 1 s): the extra hop a plain client pays "
        "for a key another pod serves, on top of the command itself. Above 1 ms (yellow) the pods' network "
        "or the owner is slow.",
        [
            (quantile(0.5, "le", NODE, FORWARD_BUCKETS), "p50"),
            (quantile(0.99, "le", NODE, FORWARD_BUCKETS), "p99"),
        ],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
    )
    b.panel(
        "bargauge",
        "Top slots by keys",
        "The hash slots holding the most keys now, per CacheCluster (strata_cluster_slot_keys: each pod names "
        "its 10 fullest slots). One slot far above the rest is a hot hash tag: its keys cannot be spread "
        "over pods.",
        [(f"topk(10, sum by (cachecluster, slot) (strata_cluster_slot_keys{{{NODE}}}))",
          "{{cachecluster}} slot {{slot}}")],
        "short",
        thresholds(GREEN),
        instant=True,
        options=top_slots_options(),
    )


# Slot migration (issue 23): the source and the target of each migration export these.
MIGRATION_STUCK_SECONDS = 600


def migration_panels(b, by, legend, w=6):
    """Live slot migration: what is moving, how fast, what it pauses, and for how long.

    by/legend: "cachecluster"/"{{cachecluster}}" on the overview, "pod"/"{{pod}}" on the node
    dashboard."""
    b.panel(
        "timeseries",
        "Migrations in flight",
        f"Slot migrations running now, by role: a pod sending slots (source) or receiving them (target) "
        f"(strata_cluster_migrations_in_flight), and migrations ended per hour by outcome "
        f"(strata_cluster_migrations_total: committed, failed: the source kept the slots, aborted: "
        f"cancelled). A scale-out or scale-in runs a few at a time; failures retry.",
        [
            (f"sum by ({by}, role) (strata_cluster_migrations_in_flight{{{NODE}}})", f"{legend} {{{{role}}}}"),
            (
                f"sum by ({by}, outcome) (increase(strata_cluster_migrations_total{{role=\"source\", {NODE}}}[1h]))",
                f"{legend} {{{{outcome}}}}/h",
            ),
        ],
        "short",
        thresholds(GREEN),
        w=w,
        defaults={"min": 0, "decimals": 0},
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*failed/h"},
                "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": RED}}],
            }
        ],
    )
    b.panel(
        "timeseries",
        "Keys and bytes moved",
        "Per second: keys the sources sent to their targets (strata_cluster_migration_keys_total, "
        "role source: the snapshot of the slots, RAM and disk-resident records, then the writes made "
        "meanwhile) and their payload bytes (strata_cluster_migration_bytes_total, right axis).",
        [
            (rate("strata_cluster_migration_keys_total", 'role="source", ' + NODE, by=by), f"{legend} keys/s"),
            (rate("strata_cluster_migration_bytes_total", 'role="source", ' + NODE, by=by), f"{legend} bytes/s"),
        ],
        "short",
        thresholds(GREEN),
        w=w,
        defaults={"min": 0},
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*bytes/s"},
                "properties": [{"id": "unit", "value": "Bps"}, {"id": "custom.axisPlacement", "value": "right"}],
            }
        ],
    )
    b.panel(
        "timeseries",
        "Paused writes per minute",
        "Time commands on the migrating slots waited on the source during handovers, per minute "
        "(strata_cluster_migration_pause_seconds_total): the brief pause while the target makes what it "
        "received durable. Milliseconds per handover; above 1 s a minute (yellow) clients notice.",
        [(f"sum by ({by}) (increase(strata_cluster_migration_pause_seconds_total{{{NODE}}}[1m]))", legend)],
        "s",
        thresholds(GREEN, (1, YELLOW), (10, RED)),
        w=w,
        defaults={"min": 0},
    )
    b.panel(
        "timeseries",
        "Migration elapsed",
        f"How long the migration in flight on each pod has run (strata_cluster_migration_seconds; 0 when "
        f"none). It grows with the slots' data; past {MIGRATION_STUCK_SECONDS // 60} minutes (red) the alert "
        f"StrataClusterMigrationStuck fires: STRATA.MIGRATE STATUS on the pod's admin port says which phase.",
        [(f"max by ({by}) (strata_cluster_migration_seconds{{{NODE}}})", legend)],
        "s",
        thresholds(GREEN, (MIGRATION_STUCK_SECONDS / 2, YELLOW), (MIGRATION_STUCK_SECONDS, RED)),
        w=w,
        defaults={"min": 0},
    )


def cluster_node_panels(b):
    """The cluster row of the node dashboard: per pod."""
    b.row("Cluster mode")
    b.panel(
        "timeseries",
        "Slots owned and covered",
        f"Hash slots each pod serves (strata_cluster_slots_owned) and slots some node serves in its topology "
        f"(strata_cluster_slots_covered: {SLOTS} when the cluster is whole), with the nodes its topology "
        f"names (strata_cluster_nodes, right axis).",
        [
            (f"strata_cluster_slots_owned{{{NODE}}}", "{{pod}} owned"),
            (f"strata_cluster_slots_covered{{{NODE}}}", "{{pod}} covered"),
            (f"strata_cluster_nodes{{{NODE}}}", "{{pod}} nodes"),
        ],
        "short",
        thresholds(GREEN),
        w=6,
        defaults={"min": 0, "decimals": 0},
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*nodes"},
                "properties": [{"id": "custom.axisPlacement", "value": "right"}],
            }
        ],
    )
    b.panel(
        "timeseries",
        "Topology epoch",
        "Epoch of the topology each pod applied (strata_cluster_topology_epoch); 0: none yet (CLUSTERDOWN).",
        [(f"strata_cluster_topology_epoch{{{NODE}}}", "{{pod}}")],
        "short",
        thresholds(GREEN),
        w=6,
        defaults={"min": 0, "decimals": 0},
    )
    b.panel(
        "timeseries",
        "Forwarded, forward errors, MOVED",
        "Per pod and second: requests forwarded to the slot's owner for plain clients "
        "(strata_cluster_forwarded_total), those that failed to reach it (strata_cluster_forward_errors_total), "
        "and MOVED replies on the direct port (strata_cluster_moved_total).",
        [
            (rate("strata_cluster_forwarded_total", by="pod"), "{{pod}} forwarded"),
            (rate("strata_cluster_forward_errors_total", by="pod"), "{{pod}} forward errors"),
            (rate("strata_cluster_moved_total", by="pod"), "{{pod}} MOVED"),
        ],
        "ops",
        thresholds(GREEN),
        w=6,
    )
    b.panel(
        "timeseries",
        "Forwarding latency",
        "Per pod: p50 / p99 of the forwarded requests' round trip to the owner (histogram "
        "strata_cluster_forward_duration_seconds) and the mean (its _sum over _count).",
        [
            (quantile(0.5, "pod, le", NODE, FORWARD_BUCKETS), "{{pod}} p50"),
            (quantile(0.99, "pod, le", NODE, FORWARD_BUCKETS), "{{pod}} p99"),
            (
                f"{rate('strata_cluster_forward_duration_seconds_sum', by='pod')} / "
                f"{rate('strata_cluster_forward_duration_seconds_count', by='pod')}",
                "{{pod}} mean",
            ),
        ],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
        w=6,
    )
    b.panel(
        "bargauge",
        "Top slots by keys",
        "The 10 hash slots holding the most keys on each pod now (strata_cluster_slot_keys).",
        [(f"topk(10, strata_cluster_slot_keys{{{NODE}}})", "{{pod}} slot {{slot}}")],
        "short",
        thresholds(GREEN),
        instant=True,
        options=top_slots_options(),
    )
    b.panel(
        "timeseries",
        "Hot-slot skew",
        "Keys of each pod's fullest slot (strata_cluster_slot_keys) over its mean keys per owned slot "
        "(strata_keys summed over databases, over strata_cluster_slots_owned). About 1 when keys spread "
        "evenly; far above (yellow at 10) one hash tag holds a large share of the pod's keys.",
        [
            (
                f"max by (namespace, cachecluster, pod) (strata_cluster_slot_keys{{{NODE}}}) "
                f"/ on (namespace, cachecluster, pod) "
                f"(sum by (namespace, cachecluster, pod) (strata_keys{{{NODE}}}) "
                f"/ on (namespace, cachecluster, pod) (strata_cluster_slots_owned{{{NODE}}} > 0))",
                "{{pod}}",
            )
        ],
        "short",
        thresholds(GREEN, (10, YELLOW), (100, RED)),
        defaults={"min": 0},
    )


def overview():
    b = Board(
        "strata-overview",
        "Strata / Cluster overview",
        "Every CacheCluster at a glance: traffic, hit ratio, latency, memory against maxmemory, "
        "evictions, slots and routing in cluster mode, connections and pods ready.",
        ["strata"],
        node_variables(),
    )
    b.row("Traffic")
    b.panel(
        "timeseries",
        "Operations per second by command",
        "Commands executed per second, per command name (rate of strata_commands_total), over the selected pods.",
        [(rate("strata_commands_total", by="command"), "{{command}}")],
        "ops",
        thresholds(GREEN),
    )
    b.panel(
        "timeseries",
        "Hit ratio",
        "Share of key lookups that found the key (strata_keyspace_hits_total over hits + misses), per "
        "CacheCluster. Below 80% (yellow) the cache is too small for the working set or keys expire too soon.",
        [(hit_ratio("namespace, cachecluster"), "{{namespace}}/{{cachecluster}}")],
        "percentunit",
        thresholds(RED, (0.5, YELLOW), (0.8, GREEN)),
        defaults={"min": 0, "max": 1},
    )
    b.panel(
        "timeseries",
        "Command latency p50 / p99 / p99.9",
        "Server-side command execution time from the node's histogram strata_command_duration_seconds "
        "(buckets from 10 µs to 1 s; network time not included). Above 1 ms (yellow) or 10 ms (red) a "
        "command waits on something it should not.",
        [
            (quantile(0.5, "le", NODE), "p50"),
            (quantile(0.99, "le", NODE), "p99"),
            (quantile(0.999, "le", NODE), "p99.9"),
        ],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
    )
    b.panel(
        "timeseries",
        "Errors per second",
        "Commands that replied with an error (strata_command_failures_total), commands refused before "
        "execution, e.g. OOM with noeviction or wrong arity (strata_commands_rejected_total), and "
        "connections closed for malformed RESP (strata_protocol_errors_total).",
        [
            (rate("strata_command_failures_total"), "failed"),
            (rate("strata_commands_rejected_total"), "rejected"),
            (rate("strata_protocol_errors_total"), "protocol errors"),
        ],
        "ops",
        thresholds(GREEN, (1, RED)),
    )
    b.row("Memory and keys")
    b.panel(
        "timeseries",
        "Memory used vs maxmemory",
        "What each node's allocator holds (strata_memory_used_bytes{component=\"total\"}, Redis's "
        "used_memory) against its budget (strata_memory_max_bytes, 0 = no limit), and its resident set "
        "(strata_memory_rss_bytes). A full cache sits at its budget and evicts; RSS should stay below "
        "1.15 x maxmemory.",
        [
            (f'strata_memory_used_bytes{{component="total", {NODE}}}', "{{pod}} used"),
            (f"strata_memory_max_bytes{{{NODE}}}", "{{pod}} maxmemory"),
            (f"strata_memory_rss_bytes{{{NODE}}}", "{{pod}} RSS"),
        ],
        "bytes",
        thresholds(GREEN),
        w=16,
    )
    b.panel(
        "bargauge",
        "Memory used / maxmemory",
        "Used memory as a share of maxmemory per pod (empty for a node without a limit). At 100% "
        "writes evict (or, with noeviction, fail).",
        [
            (
                f'strata_memory_used_bytes{{component="total", {NODE}}} / on (namespace, cachecluster, pod) '
                f"(strata_memory_max_bytes{{{NODE}}} > 0)",
                "{{pod}}",
            )
        ],
        "percentunit",
        thresholds(GREEN, (0.9, YELLOW), (0.98, RED)),
        w=8,
        defaults={"min": 0, "max": 1},
        options={"orientation": "horizontal", "displayMode": "gradient",
                 "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
    )
    b.panel(
        "timeseries",
        "Evictions and expirations per second",
        "Keys evicted to stay under maxmemory (strata_evicted_keys_total) and keys removed because their "
        "TTL passed (strata_expired_keys_total). Steady evictions are what a full cache does; a jump means "
        "the working set outgrew memory.",
        [
            (rate("strata_evicted_keys_total", by="cachecluster"), "{{cachecluster}} evicted"),
            (rate("strata_expired_keys_total", by="cachecluster"), "{{cachecluster}} expired"),
        ],
        "cps",
        thresholds(GREEN),
    )
    b.panel(
        "timeseries",
        "Keys",
        "Keys held by each node, all databases (strata_keys).",
        [(f"sum by (pod) (strata_keys{{{NODE}}})", "{{pod}}")],
        "short",
        thresholds(GREEN),
    )
    b.row("Disk tier and durability")
    cold_tier_panels(b, 8)
    b.panel(
        "timeseries",
        "Durability lag",
        "Age of the oldest acknowledged write not yet made durable by an fsync (strata_durability_lag_age_seconds, "
        "an upper bound), per pod with durability on: in a crash, periodic and write-back modes lose at most the "
        "writes of this window (0 in sync mode). Above 1 s (yellow) the disk does not keep up.",
        [(f"strata_durability_lag_age_seconds{{{NODE}}}", "{{pod}}")],
        "s",
        thresholds(GREEN, (1, YELLOW), (5, RED)),
        w=8,
        defaults={"min": 0},
    )
    cluster_overview_panels(b)
    b.row("Cluster mode: slot migration")
    migration_panels(b, "cachecluster", "{{cachecluster}}")
    b.row("Clients and pods")
    b.panel(
        "timeseries",
        "Connections",
        "Connected clients per pod (strata_connections) against the most it accepts "
        "(strata_connections_max: maxclients, as far as the open files limit allows), and connections "
        "refused at that limit per second (strata_connections_rejected_total; any is a problem).",
        [
            (f"strata_connections{{{NODE}}}", "{{pod}}"),
            (f"strata_connections_max{{{NODE}}}", "{{pod}} maxclients"),
            (rate("strata_connections_rejected_total", by="pod"), "{{pod}} refused/s"),
        ],
        "short",
        thresholds(GREEN),
        w=8,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*maxclients"},
                "properties": [
                    {"id": "custom.axisPlacement", "value": "right"},
                    {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                ],
            }
        ],
    )
    b.panel(
        "timeseries",
        "Network traffic",
        "Bytes read from and written to clients per second (strata_net_input_bytes_total, "
        "strata_net_output_bytes_total).",
        [
            (rate("strata_net_input_bytes_total"), "in"),
            (rate("strata_net_output_bytes_total"), "out"),
        ],
        "Bps",
        thresholds(GREEN),
        w=8,
    )
    b.panel(
        "timeseries",
        "Pods ready vs desired",
        "Cache node pods per CacheCluster as the operator sees them (strata_cachecluster_replicas): desired "
        "is spec.replicas. Ready below desired for long means pods cannot start or pass /readyz.",
        [(f'strata_cachecluster_replicas{{{CLUSTER}, state=~"desired|ready"}}', "{{cachecluster}} {{state}}")],
        "short",
        thresholds(GREEN),
        w=8,
        defaults={"min": 0, "decimals": 0},
    )
    return b


def node_detail():
    b = Board(
        "strata-node",
        "Strata / Node detail",
        "One cache node at a time: threads and per-worker load, per-command latency and errors, keyspace "
        "by db, cluster mode's slots and forwarding, the durability log, memory by component and connection "
        "buffers.",
        ["strata"],
        node_variables(),
    )
    b.row("Threads")
    b.panel(
        "timeseries",
        "Worker threads: configured vs active",
        "Worker threads (strata_worker_threads) and those taking connections now "
        "(strata_worker_threads_active): the adaptive balancer serves from as few workers as the load needs.",
        [
            (f"strata_worker_threads{{{NODE}}}", "{{pod}} workers"),
            (f"strata_worker_threads_active{{{NODE}}}", "{{pod}} active"),
        ],
        "short",
        thresholds(GREEN),
        defaults={"min": 0, "decimals": 0},
    )
    b.panel(
        "timeseries",
        "Connection migrations",
        "Connections moved between worker threads per second (strata_connection_migrations_total), when "
        "the balancer grows or shrinks the set of active workers.",
        [(rate("strata_connection_migrations_total", by="pod"), "{{pod}}")],
        "cps",
        thresholds(GREEN),
    )
    b.panel(
        "timeseries",
        "Worker growth trials",
        "Each time the balancer adds workers it checks, 0.4 s later, that commands per second rose by 10% "
        "(strata_worker_thread_growths_total by outcome, per minute). Undone growths mean the clients, not "
        "the node, set the pace (or share its cores): the node stays on fewer workers and retries after a "
        "back-off of 5 s to a minute.",
        [(f"60 * {rate('strata_worker_thread_growths_total', by='pod, outcome')}", "{{pod}} {{outcome}}")],
        "short",
        thresholds(GREEN),
        defaults={"min": 0},
    )
    b.panel(
        "timeseries",
        "Per-worker load (CPU)",
        "CPU seconds per second each worker thread uses (rate of strata_worker_cpu_seconds_total, sampled "
        "every 100 ms). The adaptive balancer adds a worker when one runs above 85% (yellow) and gives one "
        "back when the rest would stay below 50%; a worker pinned at 100% (red) is the node's ceiling.",
        [(rate("strata_worker_cpu_seconds_total", by="pod, worker"), "{{pod}} worker {{worker}}")],
        "percentunit",
        thresholds(GREEN, (0.85, YELLOW), (0.98, RED)),
        defaults={"min": 0},
    )
    b.panel(
        "timeseries",
        "Per-worker commands per second",
        "Commands each worker thread executes per second (strata_worker_commands_total): uneven lines mean "
        "a few busy connections on one worker.",
        [(rate("strata_worker_commands_total", by="pod, worker"), "{{pod}} worker {{worker}}")],
        "ops",
        thresholds(GREEN),
    )
    b.panel(
        "state-timeline",
        "Active worker threads",
        "Which worker threads take new connections (strata_worker_active: 1 active, 0 idle), per worker: "
        "the adaptive balancer's set over time.",
        [(f"strata_worker_active{{{NODE}}}", "{{pod}} worker {{worker}}")],
        "short",
        thresholds(GREEN),
        defaults={"min": 0, "max": 1, "decimals": 0,
                  "mappings": [{"type": "value", "options": {"0": {"text": "idle", "color": "text"},
                                                             "1": {"text": "active", "color": GREEN}}}]},
        options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
    )
    b.panel(
        "timeseries",
        "Connections per worker",
        "Connections each worker thread owns (strata_worker_connections); new ones go to the active "
        "worker with the fewest.",
        [(f"strata_worker_connections{{{NODE}}}", "{{pod}} worker {{worker}}")],
        "short",
        thresholds(GREEN),
        defaults={"min": 0, "decimals": 0},
    )
    b.row("Commands")
    b.panel(
        "timeseries",
        "p99 latency by command",
        "99th percentile of server-side execution time per command (strata_command_duration_seconds). "
        "Commands without calls in the window show no line.",
        [(quantile(0.99, "command, le", NODE), "{{command}}")],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
    )
    b.panel(
        "timeseries",
        "Mean latency by command",
        "Average execution time per command: rate of strata_command_duration_seconds_sum over _count.",
        [
            (
                f"{rate('strata_command_duration_seconds_sum', by='command')} / "
                f"{rate('strata_command_duration_seconds_count', by='command')}",
                "{{command}}",
            )
        ],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
    )
    b.panel(
        "timeseries",
        "Slow commands (> 10 ms) per second",
        "Calls per second that took longer than 10 ms, per command: the histogram's count minus its "
        "le=\"0.01\" bucket. An in-memory cache should show none.",
        [
            (
                f"{rate('strata_command_duration_seconds_count', by='command')} - "
                + rate("strata_command_duration_seconds_bucket", selector=NODE + ', le="0.01"', by="command"),
                "{{command}}",
            )
        ],
        "ops",
        thresholds(GREEN, (0.1, RED)),
    )
    b.panel(
        "timeseries",
        "Failures and rejections by command",
        "Per command: calls that replied with an error (strata_command_failures_total) and calls refused "
        "before execution, e.g. OOM or arity (strata_commands_rejected_total).",
        [
            (rate("strata_command_failures_total", by="command"), "{{command}} failed"),
            (rate("strata_commands_rejected_total", by="command"), "{{command}} rejected"),
        ],
        "ops",
        thresholds(GREEN, (1, RED)),
    )
    b.row("Keyspace")
    b.panel(
        "bargauge",
        "Keys by database",
        "Keys per logical database (strata_keys{db}), summed over the selected pods.",
        [(f"sum by (db) (strata_keys{{{NODE}}})", "db {{db}}")],
        "short",
        thresholds(GREEN),
        options={"orientation": "horizontal", "displayMode": "basic",
                 "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
    )
    b.panel(
        "timeseries",
        "Hits and misses per second",
        "Key lookups that found the key (strata_keyspace_hits_total) and that did not "
        "(strata_keyspace_misses_total), per pod.",
        [
            (rate("strata_keyspace_hits_total", by="pod"), "{{pod}} hits"),
            (rate("strata_keyspace_misses_total", by="pod"), "{{pod}} misses"),
        ],
        "ops",
        thresholds(GREEN),
    )
    b.panel(
        "timeseries",
        "Evicted memory per second",
        "Bytes freed by eviction per second (strata_evicted_bytes_total), per pod.",
        [(rate("strata_evicted_bytes_total", by="pod"), "{{pod}}")],
        "Bps",
        thresholds(GREEN),
    )
    cluster_node_panels(b)
    b.row("Cluster mode: slot migration")
    migration_panels(b, "pod", "{{pod}}")
    b.row("Durability")
    b.panel(
        "timeseries",
        "Durability lag",
        "Records appended to the log but not yet made durable by an fsync (strata_durability_lag_records). "
        "Near 0 in sync mode; periodic and write-back modes may lose this many acknowledged writes in a "
        "crash. Only nodes with durability on (a data dir) export it.",
        [(f"strata_durability_lag_records{{{NODE}}}", "{{pod}}")],
        "short",
        thresholds(GREEN, (1000, YELLOW), (100000, RED)),
        w=6,
        defaults={"min": 0},
    )
    b.panel(
        "timeseries",
        "fsync latency p50 / p99",
        "Time of one log flush, write and fdatasync, from the node's histogram strata_log_fsync_duration_seconds "
        "(buckets from 10 µs to 1 s), and the mean (rate of strata_log_fsync_seconds_total over "
        "strata_log_fsyncs_total). In sync mode every write waits for it; above 10 ms (yellow) the disk is slow.",
        [
            (quantile(0.5, "pod, le", NODE, "strata_log_fsync_duration_seconds_bucket"), "{{pod}} p50"),
            (quantile(0.99, "pod, le", NODE, "strata_log_fsync_duration_seconds_bucket"), "{{pod}} p99"),
            (
                f"{rate('strata_log_fsync_seconds_total', by='pod')} / {rate('strata_log_fsyncs_total', by='pod')}",
                "{{pod}} mean",
            ),
        ],
        "s",
        thresholds(GREEN, (0.01, YELLOW), (0.1, RED)),
        w=6,
    )
    b.panel(
        "timeseries",
        "Group-commit size",
        "Records made durable per flush: p50 / p99 from the node's histogram strata_group_commit_records "
        "(power-of-two buckets from 1 to 65536, so a quantile is good to a factor of two), the mean over the "
        "window (rate of strata_log_fsync_records_total over strata_log_fsyncs_total) and the largest batch "
        "since start (strata_group_commit_max_records). Large batches mean many writers share each fsync.",
        [
            (quantile(0.5, "pod, le", NODE, "strata_group_commit_records_bucket"), "{{pod}} p50"),
            (quantile(0.99, "pod, le", NODE, "strata_group_commit_records_bucket"), "{{pod}} p99"),
            (
                f"{rate('strata_log_fsync_records_total', by='pod')} / {rate('strata_log_fsyncs_total', by='pod')}",
                "{{pod}} mean",
            ),
            (f"strata_group_commit_max_records{{{NODE}}}", "{{pod}} max"),
        ],
        "short",
        thresholds(GREEN),
        w=6,
    )
    b.panel(
        "timeseries",
        "Log size",
        "Disk held by the durability log's segments in use (strata_log_bytes; segments are preallocated "
        "whole) and how many there are (strata_log_segments, right axis). Compaction rewrites live keys and "
        "frees old segments.",
        [
            (f"strata_log_bytes{{{NODE}}}", "{{pod}} bytes"),
            (f"strata_log_segments{{{NODE}}}", "{{pod}} segments"),
        ],
        "bytes",
        thresholds(GREEN),
        w=6,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*segments"},
                "properties": [
                    {"id": "unit", "value": "short"},
                    {"id": "custom.axisPlacement", "value": "right"},
                ],
            }
        ],
    )
    durability_distribution_panels(b)
    b.row("Disk tier")
    cold_tier_panels(b, 6)
    b.panel(
        "timeseries",
        "Demotions, promotions, tier evictions",
        "Values demoted from RAM to disk at maxmemory (strata_tier_demotions_total), read back into RAM when "
        "used (strata_tier_promotions_total), and keys dropped from the tier, index and all "
        "(strata_tier_evicted_keys_total: RAM held little but indexes, or the disk budget was full).",
        [
            (rate("strata_tier_demotions_total", by="pod"), "{{pod}} demoted"),
            (rate("strata_tier_promotions_total", by="pod"), "{{pod}} promoted"),
            (rate("strata_tier_evicted_keys_total", by="pod"), "{{pod}} evicted"),
        ],
        "cps",
        thresholds(GREEN),
        w=6,
    )
    b.panel(
        "timeseries",
        "Keys on disk",
        "Keys whose value is only on the disk tier (strata_tier_disk_keys) out of all keys (strata_keys). Each "
        "still takes its index entry in RAM.",
        [
            (f"strata_tier_disk_keys{{{NODE}}}", "{{pod}} on disk"),
            (f"sum by (pod) (strata_keys{{{NODE}}})", "{{pod}} all keys"),
        ],
        "short",
        thresholds(GREEN),
        w=6,
    )
    b.panel(
        "timeseries",
        "Cold reads",
        "Reads of cold values per second (strata_tier_reads_total): started for a waiting command (pending), "
        "joined by another waiter (shared), done at once for keys a command did not declare (sync), and failed "
        "(error: the key is lost, look at the node's log). Right axis: where they were served "
        "(strata_tier_device_reads_total: the device, or the buffer of records not written yet).",
        [
            (rate("strata_tier_reads_total", by="kind"), "{{kind}}"),
            (rate("strata_tier_device_reads_total", by="source"), "from {{source}}"),
        ],
        "ops",
        thresholds(GREEN),
        w=8,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": "from .*"},
                "properties": [{"id": "custom.axisPlacement", "value": "right"}],
            },
            {
                "matcher": {"id": "byName", "options": "error"},
                "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": RED}}],
            },
        ],
    )
    b.panel(
        "timeseries",
        "Tier writes and garbage",
        "Record bytes written to the tier per second (strata_tier_written_bytes_total), bytes no key refers to any "
        "more (strata_tier_dead_bytes, reclaimed by cleaning) and segments cleaned per second "
        "(strata_tier_cleaned_segments_total, right axis).",
        [
            (rate("strata_tier_written_bytes_total", by="pod"), "{{pod}} written/s"),
            (f"strata_tier_dead_bytes{{{NODE}}}", "{{pod}} dead"),
            (rate("strata_tier_cleaned_segments_total", by="pod"), "{{pod}} cleaned segments/s"),
        ],
        "bytes",
        thresholds(GREEN),
        w=8,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*written/s"},
                "properties": [{"id": "unit", "value": "Bps"}],
            },
            {
                "matcher": {"id": "byRegexp", "options": ".*segments/s"},
                "properties": [{"id": "unit", "value": "short"}, {"id": "custom.axisPlacement", "value": "right"}],
            },
        ],
    )
    b.panel(
        "timeseries",
        "Cold-read latency",
        "Time of one read from the disk tier's device, issue to completion (p50 / p99 of the histogram "
        "strata_tier_read_duration_seconds, buckets from 10 µs to 1 s), and GET's server-side p99 "
        "(strata_command_duration_seconds: a GET that waits for the disk includes that wait).",
        [
            (quantile(0.5, "pod, le", NODE, "strata_tier_read_duration_seconds_bucket"), "{{pod}} disk read p50"),
            (quantile(0.99, "pod, le", NODE, "strata_tier_read_duration_seconds_bucket"), "{{pod}} disk read p99"),
            (quantile(0.99, "pod, le", f'command="get", {NODE}'), "{{pod}} GET p99"),
        ],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
        w=8,
    )
    b.panel(
        "timeseries",
        "Cold read stages",
        "Where a cold read's time goes, p50 / p99 per stage (strata_tier_read_stage_duration_seconds, the same "
        "buckets as strata_tier_read_duration_seconds, which covers queue and device together): queue, from issue "
        "until the device started it (a worker's batch of reads and the hand-over to the I/O engine); device, on "
        "the device; wake, from its completion until the waiting command ran again. The largest stage names the "
        "bottleneck: queue, the submission path or the engine thread is behind; device, the disk itself (see "
        "reads in flight); wake, the worker thread is busy (CPU-bound) and late to resume the command.",
        [
            (
                quantile(0.5, "pod, stage, le", NODE, "strata_tier_read_stage_duration_seconds_bucket"),
                "{{pod}} {{stage}} p50",
            ),
            (
                quantile(0.99, "pod, stage, le", NODE, "strata_tier_read_stage_duration_seconds_bucket"),
                "{{pod}} {{stage}} p99",
            ),
        ],
        "s",
        thresholds(GREEN, (0.001, YELLOW), (0.01, RED)),
        w=16,
    )
    b.panel(
        "timeseries",
        "Reads in flight, read-ahead",
        "Cold-tier device reads issued and not completed (strata_tier_reads_in_flight: the device's queue "
        "depth from the tier's side; many in flight and a slow device stage: the disk is the limit) and cold "
        "reads started per second for requests further along a pipeline than the one waiting "
        "(strata_tier_read_ahead_total, right axis: pipeline read-ahead; 0 without pipelined clients).",
        [
            (f"strata_tier_reads_in_flight{{{NODE}}}", "{{pod}} in flight"),
            (rate("strata_tier_read_ahead_total", by="pod"), "{{pod}} read-ahead/s"),
        ],
        "short",
        thresholds(GREEN),
        w=8,
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*read-ahead/s"},
                "properties": [{"id": "unit", "value": "ops"}, {"id": "custom.axisPlacement", "value": "right"}],
            }
        ],
    )
    b.row("Memory and buffers")
    b.panel(
        "timeseries",
        "Memory by component",
        "strata_memory_used_bytes: total (what the allocator holds), of which the keyspace and the "
        "connections' query and output buffers.",
        [(f"strata_memory_used_bytes{{{NODE}}}", "{{pod}} {{component}}")],
        "bytes",
        thresholds(GREEN),
    )
    b.panel(
        "timeseries",
        "Client buffers",
        "Memory of the connections' query and output buffers (strata_memory_used_bytes{component=\"connections\"}) "
        "and clients disconnected per second for exceeding their output buffer limit "
        "(strata_output_buffer_disconnects_total, right axis).",
        [
            (f'strata_memory_used_bytes{{component="connections", {NODE}}}', "{{pod}} buffers"),
            (rate("strata_output_buffer_disconnects_total", by="pod"), "{{pod}} disconnects/s"),
        ],
        "bytes",
        thresholds(GREEN),
        overrides=[
            {
                "matcher": {"id": "byRegexp", "options": ".*disconnects/s"},
                "properties": [
                    {"id": "unit", "value": "cps"},
                    {"id": "custom.axisPlacement", "value": "right"},
                ],
            }
        ],
    )
    b.panel(
        "timeseries",
        "Allocator",
        "The allocator's figures (strata_memory_allocator_bytes): allocated, active pages, resident; "
        "and huge pages in use (strata_hugepages_bytes).",
        [
            (f"strata_memory_allocator_bytes{{{NODE}}}", "{{pod}} {{state}}"),
            (f"strata_hugepages_bytes{{{NODE}}}", "{{pod}} hugepages"),
        ],
        "bytes",
        thresholds(GREEN),
    )
    b.panel(
        "stat",
        "Uptime",
        "Time since each node started (strata_uptime_seconds); a reset means a restart and a cold cache.",
        [(f"strata_uptime_seconds{{{NODE}}}", "{{pod}}")],
        "s",
        thresholds(RED, (300, GREEN)),
    )
    return b


def operator():
    op_vars = [
        datasource_var(),
        query_var("namespace", "Namespace", "label_values(strata_cachecluster_replicas, namespace)"),
        query_var("cluster", "CacheCluster", 'label_values(strata_cachecluster_replicas{namespace=~"$namespace"}, cachecluster)'),
    ]
    b = Board(
        "strata-operator",
        "Strata / Operator",
        "The strata-operator: reconciliations, errors by reason, reconcile duration, the leader, and the "
        "CacheClusters it runs (pods, rollouts, conditions).",
        ["strata"],
        op_vars,
    )
    b.row("Controller")
    b.panel(
        "timeseries",
        "Reconciliations per second",
        "CacheCluster reconciliations started per second, per operator pod "
        "(strata_operator_reconciliations_total). Only the leader reconciles.",
        [("sum by (pod) (rate(strata_operator_reconciliations_total[$__rate_interval]))", "{{pod}}")],
        "ops",
        thresholds(GREEN),
        w=8,
    )
    b.panel(
        "timeseries",
        "Reconcile errors by reason",
        "Failed reconciliations per second by reason (strata_operator_reconcile_errors_total): Apply, Read, "
        "Evict, Status, NoNamespace. The operator logs each with the object and the API error.",
        [("sum by (reason) (rate(strata_operator_reconcile_errors_total[$__rate_interval]))", "{{reason}}")],
        "ops",
        thresholds(GREEN, (0.01, RED)),
        w=8,
    )
    b.panel(
        "timeseries",
        "Reconcile duration",
        "p50 and p99 of the time one reconciliation takes (strata_operator_reconcile_duration_seconds): a "
        "handful of API calls, normally well under a second.",
        [
            ("histogram_quantile(0.5, sum by (le) (rate(strata_operator_reconcile_duration_seconds_bucket[$__rate_interval])))", "p50"),
            ("histogram_quantile(0.99, sum by (le) (rate(strata_operator_reconcile_duration_seconds_bucket[$__rate_interval])))", "p99"),
        ],
        "s",
        thresholds(GREEN, (1, YELLOW), (5, RED)),
        w=8,
    )
    b.panel(
        "stat",
        "Leaders",
        "Operator pods holding the leader Lease (sum of strata_operator_leader): 1 is healthy; 0 means no "
        "CacheCluster is being reconciled.",
        [("sum(strata_operator_leader)", "leaders")],
        "short",
        thresholds(RED, (1, GREEN), (2, RED)),
        w=6,
        defaults={"decimals": 0},
    )
    b.panel(
        "timeseries",
        "Leader by pod",
        "strata_operator_leader per operator pod: 1 while it holds the Lease and runs the controller.",
        [("strata_operator_leader", "{{pod}}")],
        "short",
        thresholds(GREEN),
        w=6,
        defaults={"min": 0, "max": 1, "decimals": 0},
    )
    b.panel(
        "stat",
        "Rollouts in progress",
        "CacheClusters whose Progressing condition is True (strata_cachecluster_condition): the operator is "
        "replacing pods one at a time, or creating them.",
        [(f'sum(strata_cachecluster_condition{{condition="Progressing", {CLUSTER}}})', "rolling")],
        "short",
        thresholds(GREEN, (1, YELLOW)),
        w=6,
        defaults={"decimals": 0},
    )
    b.panel(
        "stat",
        "Degraded CacheClusters",
        "CacheClusters whose Degraded condition is True: pods failing or restarting, or a spec the operator "
        "cannot run (kubectl describe cachecluster says why).",
        [(f'sum(strata_cachecluster_condition{{condition="Degraded", {CLUSTER}}})', "degraded")],
        "short",
        thresholds(GREEN, (1, RED)),
        w=6,
        defaults={"decimals": 0},
    )
    b.row("CacheClusters")
    b.panel(
        "timeseries",
        "Pods by state",
        "strata_cachecluster_replicas: desired (spec.replicas), current (exist), ready, updated (run the "
        "current spec), per CacheCluster.",
        [(f"strata_cachecluster_replicas{{{CLUSTER}}}", "{{namespace}}/{{cachecluster}} {{state}}")],
        "short",
        thresholds(GREEN),
        defaults={"min": 0, "decimals": 0},
    )
    b.panel(
        "timeseries",
        "Conditions",
        "strata_cachecluster_condition: 1 while a condition is True (Available, Progressing, Degraded, "
        "Monitoring), per CacheCluster.",
        [(f"strata_cachecluster_condition{{{CLUSTER}}}", "{{cachecluster}} {{condition}}")],
        "short",
        thresholds(GREEN),
        defaults={"min": 0, "max": 1, "decimals": 0},
    )
    return b


BOARDS = {"strata-overview.json": overview, "strata-node.json": node_detail, "strata-operator.json": operator}


def render(build):
    return json.dumps(build().json(), indent=2, ensure_ascii=False) + "\n"


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__, file=sys.stderr)
        return 2
    stale = []
    for name, build in BOARDS.items():
        text = render(build)
        path = OUT / name
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(exist_ok=True)
            path.write_text(text)
            print(f"wrote dashboards/{name}", file=sys.stderr)
    if stale:
        print(f"build-dashboards: stale {', '.join(stale)}: run scripts/build-dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
