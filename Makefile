# Strata — developer entry points. `make help` lists them.
SHELL := /bin/bash
CARGO ?= cargo
# Build outputs live outside the clone when STRATA_CACHE is set (CI does), so
# a fresh clone reuses the previous build.
ifdef STRATA_CACHE
export CARGO_TARGET_DIR ?= $(STRATA_CACHE)/target
endif

.PHONY: help deps build run test check lint fmt bench crds chart manifests dashboards dashboards-check dashboards-png k8s-tools images e2e clean redis-tests diff-tier

help: ## List targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

deps: ## Install what a fresh Debian machine lacks (redis-server/redis-tools for differential tests)
	@./scripts/install-deps.sh

build: ## Build release binaries
	$(CARGO) build --release --workspace

run: ## Run the node alone (127.0.0.1:6379, data dir ./data, metrics on :9121)
	$(CARGO) run --release -p strata-node -- $(ARGS)

lint: ## rustfmt check, clippy with warnings as errors (the e2e suite included), and the node's layer order
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p strata-e2e --features e2e --all-targets -- -D warnings
	./scripts/check-layers.sh

fmt: ## Format the code
	$(CARGO) fmt --all

test: check e2e ## Every test: `check`, then the e2e suite on a real cluster

check: deps lint k8s-tools chart ## Every test but e2e: lint, chart, unit, integration, differential, operator vs a real API server, dashboards vs a real Prometheus, Redis's own suite
	$(CARGO) test --workspace --no-fail-fast
	$(MAKE) diff-tier
	./scripts/check-dashboards.sh
	./scripts/redis-tests.sh

# The families whose tests open no second connection of their own to
# compare: the tier mode's demoting connection would show in CLIENT LIST,
# INFO commandstats and LATENCY (diff_server, diff_introspection).
TIER_DIFFS := smoke strings keys lists hashes sets zsets streams hll geo sort transactions scripting notify tracking monitor slowlog client_control

diff-tier: ## The differential tests again with every key moved to the disk tier before each command (STRATA_TEST_TIER=1)
	STRATA_TEST_TIER=1 $(CARGO) test -p strata-node --no-fail-fast $(foreach t,$(TIER_DIFFS),--test diff_$(t))

redis-tests: ## Redis 7.0.15's own test suite against strata-node (when ../shared/redis-tests is there), held to a floor
	./scripts/redis-tests.sh

dashboards: ## Regenerate dashboards/*.json (scripts/build-dashboards.py) and the Helm chart's copies
	./scripts/build-dashboards.py
	mkdir -p $(CHART)/files/dashboards
	rm -f $(CHART)/files/dashboards/*.json
	cp dashboards/*.json $(CHART)/files/dashboards/
	cp dashboards/strata.rules.yaml $(CHART)/files/strata.rules.yaml
	@echo "Run 'make manifests' if the chart's defaults render them (they do not by default)."

dashboards-check: ## Every dashboard query and alert rule against a real Prometheus, a loaded node and a real operator
	./scripts/check-dashboards.sh

dashboards-png: ## The overview's panels as PNGs from a 60 s load run, into results/dashboards (or OUT=dir)
	LOAD_SECONDS=60 STRATA_DASH_PROFILE=release ./scripts/check-dashboards.sh --render $(or $(OUT),results/dashboards)

k8s-tools: ## Build once (cached in ~/.cache/strata/k8s) the kube-apiserver, etcd, kubectl and helm the tests use
	./scripts/k8s-tools.sh control-plane
	./scripts/k8s-tools.sh helm

bench: ## Benchmarks side by side with redis-server (see bench/README.md)
	./bench/redis-benchmark.sh $(ARGS)

crds: ## Regenerate crds/ (and the Helm chart's copy) from the operator's Rust types
	$(CARGO) run -q -p strata-operator --bin crdgen > crds/strata.dev_cacheclusters.yaml
	cp crds/strata.dev_cacheclusters.yaml $(CHART)/crds/strata.dev_cacheclusters.yaml
	@echo "CRD changed? Run 'make manifests' to refresh manifests/install.yaml."

# Helm from scripts/k8s-tools.sh (built once into ~/.cache/strata/k8s/bin); `helm template`
# assumes Kubernetes 1.20 unless told, which the chart's kubeVersion (>=1.33) refuses.
CHART := charts/strata-operator
HELM = $(shell ./scripts/k8s-tools.sh path)/helm
HELM_TEMPLATE = $(HELM) template strata-operator $(CHART) --namespace strata-system --kube-version 1.33.0

chart: ## Lint and render the Helm chart with default and all optional values; check manifests/ is fresh
	./scripts/k8s-tools.sh helm
	@cmp -s crds/strata.dev_cacheclusters.yaml $(CHART)/crds/strata.dev_cacheclusters.yaml || \
	  { echo "$(CHART)/crds/ differs from crds/: run 'make crds'" >&2; exit 1; }
	$(HELM) lint --strict $(CHART) --kube-version 1.33.0
	$(HELM_TEMPLATE) >/dev/null
	./scripts/build-dashboards.py --check
	@for f in dashboards/*.json dashboards/strata.rules.yaml; do \
	  c=$(CHART)/files/$${f#dashboards/}; [[ $$f == *.json ]] && c=$(CHART)/files/dashboards/$${f#dashboards/}; \
	  cmp -s "$$f" "$$c" || { echo "$$c differs from $$f: run 'make dashboards'" >&2; exit 1; }; done
	@[[ $$(ls $(CHART)/files/dashboards/*.json | wc -l) == $$(ls dashboards/*.json | wc -l) ]] || \
	  { echo "$(CHART)/files/dashboards/ holds a dashboard dashboards/ lacks: run 'make dashboards'" >&2; exit 1; }
	@# Dashboards and alerts on: one ConfigMap per dashboard with the sidecar label (and a custom one), the PrometheusRule.
	@out=$$($(HELM_TEMPLATE) --api-versions monitoring.coreos.com/v1 --set grafanaDashboards.enabled=true \
	    --set prometheusRule.enabled=true --set prometheusRule.labels.release=kps) && \
	  [[ $$(grep -c '^    grafana_dashboard: "1"$$' <<<"$$out") == $$(ls dashboards/*.json | wc -l) ]] && \
	  grep -q '^kind: PrometheusRule$$' <<<"$$out" && grep -q 'alert: StrataNoOperatorLeader' <<<"$$out" && \
	  grep -q '^    release: kps$$' <<<"$$out" || \
	  { echo "chart: dashboards ConfigMaps or PrometheusRule missing with grafanaDashboards/prometheusRule on" >&2; exit 1; }
	@out=$$($(HELM_TEMPLATE) --set grafanaDashboards.enabled=true --set grafanaDashboards.label=my_dash \
	    --set grafanaDashboards.labelValue=yes --set prometheusRule.enabled=true) && \
	  [[ $$(grep -c '^    my_dash: "yes"$$' <<<"$$out") == $$(ls dashboards/*.json | wc -l) ]] && \
	  ! grep -q '^kind: PrometheusRule$$' <<<"$$out" || \
	  { echo "chart: custom sidecar label not applied, or a PrometheusRule rendered without its API" >&2; exit 1; }
	@# Every optional feature on: each must show up in the output.
	@out=$$($(HELM_TEMPLATE) --api-versions monitoring.coreos.com/v1 --set serviceMonitor.enabled=true \
	    --set watchNamespace=apps --set leaderElection.enabled=false --set replicaCount=1) && \
	  grep -q '^kind: ServiceMonitor$$' <<<"$$out" && grep -q -- '--watch-namespace=apps' <<<"$$out" && \
	  grep -q -- '--leader-elect=false' <<<"$$out" && grep -q 'type: Recreate' <<<"$$out" || \
	  { echo "chart: rendering with every optional feature on lacks one of them" >&2; exit 1; }
	@! $(HELM_TEMPLATE) --set replicaCount=2 --set leaderElection.enabled=false >/dev/null 2>&1 || \
	  { echo "chart: replicaCount=2 without leader election must be refused" >&2; exit 1; }
	./scripts/render-manifests.sh --check

# Images for the e2e suite go here (outside the clone, cached like the rest).
IMAGES ?= $(or $(STRATA_CACHE),$(HOME)/.cache/strata)/images

images: ## Build the strata-node, strata-operator and e2e client images as tarballs (no Docker needed)
	./scripts/build-images.sh $(IMAGES)

e2e: ## End-to-end suite on a real cluster (KUBECONFIG, kind, or a local one: see e2e/README.md)
	./e2e/run.sh

manifests: ## Render manifests/install.yaml from the Helm chart
	./scripts/render-manifests.sh

clean:
	$(CARGO) clean
