# express-sequencer — every target a user or CI needs. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
IMG ?= express-sequencer:dev
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
FUZZTIME ?= 10s
# The Go modules besides api/ (checked by hack/check-api-deps.sh): the
# binary's, the kubectl plugin's (cli-runtime), the tests' (Helm,
# kustomize, cert-manager), and Argo CD's code the tests run (test/argocd).
MODULES := . api cmd/kubectl-express test test/argocd

.PHONY: help
help: ## Show the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: demo
demo: control-plane ## Run the local demo on an embedded control plane (DEMO_FLAGS=-keep keeps it up).
	$(GO) -C cmd/kubectl-express build -o $(BIN)/kubectl-express .
	cd test && KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" $(GO) run ./demo $(DEMO_FLAGS)

.PHONY: test
test: manifests generate control-plane mermaid-check ## Build what is missing, then run every test against a real kube-apiserver + etcd.
	export KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)"; for m in $(MODULES); do (cd $$m && $(GO) test ./... -count=1 -timeout 30m) || exit 1; done
	$(MAKE) fuzz

# Mermaid's own parser (npm), for the check of every diagram we ship or print.
MERMAID_CHECK := hack/mermaid-check/node_modules/.package-lock.json
$(MERMAID_CHECK): hack/mermaid-check/package-lock.json
	npm ci --prefix hack/mermaid-check --no-audit --no-fund --loglevel=error

.PHONY: mermaid-check
mermaid-check: $(MERMAID_CHECK) ## Install Mermaid's parser (npm ci in hack/mermaid-check) for the diagrams' syntax check.

.PHONY: fuzz
fuzz: ## Fuzz the admission handlers briefly (FUZZTIME, default 10s).
	$(GO) test ./internal/webhook -run '^$$' -fuzz FuzzAdmissionReview -fuzztime $(FUZZTIME) -fuzzminimizetime 2s

.PHONY: explore
explore: ## Explore every interleaving of small tenants to depth 8 with 3 events of the world (a few minutes; make test explores 8 with 2).
	EXPLORE_DEPTH=$(or $(EXPLORE_DEPTH),8) EXPLORE_EVENTS=$(or $(EXPLORE_EVENTS),3) $(GO) test ./internal/rollout -run '^TestEveryInterleavingOfSmallTenantsKeepsTheOrder$$' -count=1 -v -timeout 60m \
		| grep -E '^(=== RUN|--- |    explorer_test.go|ok|FAIL)'

.PHONY: property-more
property-more: ## Run the property test on the 100,000 seeds after make test's 10,000 (PROPERTY_FIRST_SEED, PROPERTY_SCENARIOS to choose; about 6 min).
	PROPERTY_FIRST_SEED=$(or $(PROPERTY_FIRST_SEED),10001) PROPERTY_SCENARIOS=$(or $(PROPERTY_SCENARIOS),100000) $(GO) test ./internal/rollout -run '^TestReleasesHoldTheirRequirementsInRandomScenarios$$' -count=1 -timeout 120m

.PHONY: control-plane
control-plane: ## Build kube-apiserver, etcd and kubectl from source into bin/k8s (once).
	@hack/control-plane.sh >/dev/null

.PHONY: build
build: generate ## Build bin/express-sequencer and the kubectl plugin bin/kubectl-express.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/express-sequencer ./cmd/express-sequencer
	$(GO) -C cmd/kubectl-express build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-express .

.PHONY: release-plugin
release-plugin: ## Build kubectl-express for every krew platform into dist/ and write the krew manifest dist/express.yaml.
	hack/release-plugin.sh $(VERSION)

$(CONTROLLER_GEN):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code and the typed server-side-apply configurations (internal/applyconfiguration) from the API markers.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	rm -rf internal/applyconfiguration
	$(CONTROLLER_GEN) applyconfiguration:headerFile=hack/boilerplate.go.txt,omitToolVersion=true paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC, webhook configurations and the Grafana dashboard into config/.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases \
		rbac:roleName=manager-role paths=./... output:rbac:artifacts:config=config/rbac \
		webhook paths=./... output:webhook:artifacts:config=config/webhook
	cp config/crd/bases/*.yaml charts/express-sequencer/crds/
	cp config/rbac/role.yaml charts/express-sequencer/files/role.yaml
	cp config/webhook/manifests.yaml charts/express-sequencer/files/webhooks.yaml
	mkdir -p config/grafana
	$(GO) run ./hack/dashboard > config/grafana/express-sequencer-dashboard.json
	cp config/grafana/express-sequencer-dashboard.json charts/express-sequencer/files/grafana-dashboard.json
	hack/argocd-snippets.sh

.PHONY: verify
verify: manifests generate ## Fail if generated code or manifests differ from what is committed, code is unformatted or vetted unclean, the API module imports more than k8s.io/apimachinery, or the pure decisions (internal/rollout) a client or a clock.
	@git diff --exit-code --stat -- api config charts internal/applyconfiguration && test -z "$$(git ls-files --others --exclude-standard -- api config charts internal/applyconfiguration)" \
		|| { echo "generated files are stale or untracked: run 'make manifests generate' and commit them"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "unformatted: $$(gofmt -l $$(git ls-files '*.go'))"; exit 1; }
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	hack/check-api-deps.sh
	hack/check-module-deps.sh

.PHONY: docker-build
docker-build: ## Build the container image IMG (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: bench
bench: control-plane ## The numbers of docs/performance.md: the heap a cached node holds (the sequencer's cache, the auditor's watches), 1,000 tenants × 8 nodes upgraded all at once (with a heap profile), 200 at 2 tenants/s with a crash of every pod and the admission cost, a config-only change, the sequencer's scoped read against its read of the whole tenant, the order auditor's cost (200 and 1,000 tenants with and without it), and what the fresh reads cost against a floor with none.
	mkdir -p bin
	$(GO) test ./internal/sequencer -run '^$$' -bench 'TheCacheKeepsA(Node|Pod)' -benchtime 3x
	$(GO) test ./internal/audit -run '^$$' -bench TheAuditorKeepsANode -benchtime 3x
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	$(GO) run ./bench -tenants 1000 -memprofile $(BIN)/bench-heap.pprof && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -crash 200 -admission 50 && \
	$(GO) run ./bench -tenants 1000 -change config && \
	$(MAKE) -C .. bench-reads bench-audit bench-floor

.PHONY: bench-reads
bench-reads: control-plane ## The fresh reads of the whole tenant against the reads by name (-scoped-reads, the sequencer's scoped read, and -pod-reads-by-name, the pod webhook's), side by side on Kubernetes' own control loops (StatefulSets name their pods by ordinal): 200 tenants at 2 tenants/s with a crash of every pod and the admission cost, unpinned and with kube-apiserver and etcd on a core of their own (-pin), then 1,000 × 8 at once (docs/performance.md).
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	for pin in false true; do \
	for scoped in false true; do \
	$(GO) run ./bench -cluster -controller-qps 200 -tenants 200 -upgrade-rate 2 -crash 200 -admission 50 -pin=$$pin -scoped-reads=$$scoped -pod-reads-by-name=$$scoped || exit 1; \
	done; done && \
	$(GO) run ./bench -cluster -controller-qps 200 -tenants 1000 -scoped-reads=false && \
	$(GO) run ./bench -cluster -controller-qps 200 -tenants 1000 -scoped-reads=true -pod-reads-by-name=true

.PHONY: bench-guard
bench-guard: control-plane ## What the release guard and the scoped read cost kube-apiserver, side by side (docs/performance.md): 200 tenants at 2 tenants/s with both (the default), with the whole tenant read instead of the scoped read, and without the guard.
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -scoped-reads=false && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -recheck-releases=false

.PHONY: bench-floor
bench-floor: control-plane ## What the fresh reads cost, against a floor with none (docs/performance.md): 200 tenants at 2 tenants/s with the admission cost, then 1,000 × 8 at once without the auditor, each built with -tags cachefloor (every fresh read from the cache) and then as released, one after the other.
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	for floor in true false; do \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -admission 50 -cache-floor=$$floor || exit 1; \
	done && \
	for floor in true false; do \
	$(GO) run ./bench -tenants 1000 -no-audit -cache-floor=$$floor || exit 1; \
	done

.PHONY: bench-audit
bench-audit: control-plane ## The order auditor's cost beside the sequencer's: 200 and 1,000 tenants, each without it, then with it; then 1,000 with it under a 250 MiB Go memory limit (docs/performance.md).
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -no-audit && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 && \
	$(GO) run ./bench -tenants 1000 -no-audit && \
	$(GO) run ./bench -tenants 1000 && \
	$(GO) run ./bench -tenants 1000 -sequencer-memory-limit 250MiB

.PHONY: bench-cluster
bench-cluster: control-plane ## The real stack beside the simulated one (docs/performance.md): 200 tenants at 2 tenants/s with a crash on each stack, the controller's rate limit raised, and 1,000 tenants on the real stack (about 45 minutes).
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -crash 200 && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -crash 200 -cluster && \
	$(GO) run ./bench -tenants 200 -upgrade-rate 2 -crash 200 -cluster -controller-qps 200 && \
	$(GO) run ./bench -tenants 1000 -cluster -controller-qps 200

.PHONY: soak
soak: control-plane ## The soak of docs/performance.md: 100 tenants × 8 nodes changed one after another at 2 tenants/s for 30 minutes, the sequencer sampled every minute, the plot written to docs/images/soak.png (about 35 minutes).
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	$(GO) run ./bench -soak 30m -tenants 100 -upgrade-rate 2 -soak-plot ../docs/images/soak.png

.PHONY: bench-fleet-view
bench-fleet-view: control-plane ## The fleet view's time at 2,000 tenants × 8 nodes (docs/performance.md), beside the same LISTs decoded whole and kube-apiserver serving them (about 15 minutes).
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	$(GO) run ./bench -tenants 2000 -fleet-view-only

.PHONY: bench-scaling
bench-scaling: control-plane ## The scaling table of docs/performance.md: 250, 500, 1,000 and 2,000 tenants × 8 nodes upgraded all at once.
	cd test && export KUBEBUILDER_ASSETS="$$(../hack/control-plane.sh)" && \
	for n in 250 500 1000 2000; do $(GO) run ./bench -tenants $$n || exit 1; done
