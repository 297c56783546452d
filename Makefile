# authvault: `make test` runs every check CI runs; `make demo` runs the main job.
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test vet staticcheck fmt-check gotest compat compat-build soak-check compat-and-soak test-loaded envtest peers tools stages stages-reset bench bench-flux bench-shards model-shards fuzz demo soak cluster cluster-pair cluster-revoke dashboard release

# Every test: the unit tests and the integration suite against a real
# kube-apiserver, whose binaries hack/envtest.sh builds once (about 5 min on
# two cores) and caches outside the work tree; the cloud modules' peer tests
# run aws-iam-authenticator and kubelogin, which hack/peers.sh builds once
# (about 2.5 min) and caches beside them; the browser tests drive a
# headless Chromium, which hack/chromium.sh installs once (Debian's
# chromium-headless-shell, about 20 s) and gotest passes on as
# AUTHVAULT_CHROMIUM. hack/release's tests release HEAD in a clone, publish
# it to a file module proxy and fetch each published module alone from
# outside the repository; compat builds and vets every
# module with the newer supported Kubernetes minors and runs the unit tests
# that can differ with them; soak-check runs the soak for two minutes of
# faults. The envtest and peer binaries build in the background from the
# start (tools), beside vet and staticcheck, and gotest waits for them;
# compat's builds start in the background before gotest (compat-build); at
# the end, stages prints each stage's time beside its budget.
test: stages-reset tools compat-build fmt-check vet staticcheck gotest compat-and-soak stages

TIMED := bash hack/timed.sh

# Every go command here, and those the tests run, builds with -trimpath
# (but where a test sets GOFLAGS itself, and gives -trimpath or not as it
# means to): a compiled package's cache entry then holds no directory, so
# a fresh clone finds its own packages compiled by the last run wherever
# that clone was, and the programs tests build in a module cache of their
# own (the release's consumers) find every dependency compiled too.
# Exporting GOFLAGS hides the value go env -w gave it, so this starts from
# go env GOFLAGS (or from a GOFLAGS given on make's command line).
ifeq ($(origin GOFLAGS),command line)
override GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)
else
GOFLAGS := $(strip $(filter-out -trimpath,$(shell $(GO) env GOFLAGS)) -trimpath)
endif
export GOFLAGS

# Every build here is without cgo, as the image's must be, but the two
# that are -race, which needs cgo (RACE: vet and go-test). The others
# (staticcheck, compat, the soak, the demo, and the programs the tests
# build: the examples, addon-proxy, the test plugin, the release's
# consumers, the image's binary) then share one configuration, and each
# package compiles once for all of them, not once per configuration.
export CGO_ENABLED := 0
RACE := CGO_ENABLED=1

# test's prerequisites are ordered (tools starts before gotest waits for
# it, stages-reset comes first and stages last), and the recipes run their
# own stages side by side: make -j would break that order.
.NOTPARALLEL:

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The rotation demo is a module of its own, so that its plotting library
# stays out of the library's dependencies; fmt-check sees it through git
# ls-files.
DEMO := examples/rotation-demo

# The soak (make soak) is a module of its own for the same reason.
SOAK := hack/soak

# The cloud logins are modules of their own too, so that no cloud SDK becomes
# a dependency of the library: each is vetted, checked and tested like the
# demo, with the envtest binaries for their end-to-end tests (cloud/eks runs
# one against the embedded API server, about 15 s).
CLOUD := cloud/eks cloud/gke cloud/aks

# Every module's packages, in the workspace hack/all.work: one go command
# vets, checks or tests them all, and builds each package once for all of
# them. Each module's go.mod asks for the same version of every dependency
# they share (hack/align.sh; internal/modules checks it, and that the
# workspace selects what each module alone does), so this is what each
# module builds alone too.
WORK := GOWORK='$(CURDIR)/hack/all.work'
# The modules are hack/all.work's, so that one added there is vetted,
# checked and tested here with nothing more to list.
#
# The packages whose tests take longest (go test -json) come first: go test
# starts test binaries in the order of its list, and a slow one left to
# the end runs alone while the other cores sit idle.
SLOWEST := ./integration ./fleet ./fleet/internal/shard ./hack/soak/side ./hack/release ./vault ./hack/shardbench ./integration/restart ./addonauth
PKGS ?= $(SLOWEST) ./... $(patsubst $(CURDIR)/%,./%/...,$(filter-out $(CURDIR),$(shell GOWORK='$(CURDIR)/hack/all.work' $(GO) list -m -f '{{.Dir}}')))

# The tests themselves run without GOWORK, as each module's tests would
# alone: a test that runs the go command (a plugin built from source, a
# module made in a temporary directory, a release) gets its module's own
# go.mod, not a workspace that does not hold its directory.
# The go builds tests run are without cgo, as every build but RACE's.
TEST_EXEC := -exec 'env -u GOWORK CGO_ENABLED=0'

# vet builds with -race, as go-test does: vet compiles every dependency
# to type-check against it, and with the same flags as the tests that
# compilation is go-test's too, not a second one (on a fresh machine, the
# whole Kubernetes stack once rather than twice). No file of the
# repository's has a race build constraint, so vet sees the same code.
vet:
	@$(WORK) $(RACE) $(TIMED) vet $(GO) vet -race $(PKGS)

# staticcheck type-checks against the compiler's export data, which it
# has go list build: the build the tests' programs use, and compat for the
# packages a minor leaves at go.mod's versions.
staticcheck:
	@$(WORK) $(TIMED) staticcheck $(GO) run $(STATICCHECK) $(PKGS)

# Prints the directory of the envtest binaries, building them when missing.
envtest:
	@$(TIMED) envtest bash hack/envtest.sh

# Prints the directory of the peers' exec plugins (aws-iam-authenticator,
# kubelogin), building them when missing: AUTHVAULT_PEERS for the cloud
# modules' peer tests and benchmarks.
peers:
	@$(TIMED) peers bash hack/peers.sh

# Starts building the envtest and peer binaries, and installing the headless
# Chromium, in the background when any is missing (a fresh machine): their
# builds are other projects' programs, which share no package with ours, so
# they overlap vet and staticcheck rather than wait in line. Their output
# goes to bin/tools.log; hack/tools.sh wait, in gotest, waits for them and
# prints it.
tools:
	@bash hack/tools.sh start

# The integration suite's long specs (Label "long": minutes of load
# through rotations, mostly waiting on the clock) run in a second go test
# beside the first, which runs every other test: the two halves overlap
# rather than add up. Its output follows the first's. The suite's test
# binary is built first, alone (go-test-build): two go commands building
# the same packages at once would each compile them, on a fresh machine
# the whole Kubernetes stack twice. The first runs
# three test binaries at once, not go's default of one per core: most of
# them wait on API servers, processes and timers, and at two a two-core
# machine sat half idle.
#
# The tests skip go test's own vet (-vet=off): vet, above, runs every
# analyzer over the same packages, and go test's smaller set is one more
# pass over every dependency (vet computes their facts) under a cache key
# of its own, which a fresh machine paid for the whole Kubernetes stack.
LONG := ./integration
TEST_P ?= 3
# Flux's auth beside ours (hack/peers/flux): a module of its own, out of
# the workspace (Flux's requirements), whose tests start one hub and one
# member; gotest runs them after the first go test, beside what is left of
# the long half, and go test's own vet checks them (vet above does not).
FLUX_PEER := hack/peers/flux
gotest:
	@bash hack/tools.sh wait && \
	assets=$$(bash hack/envtest.sh) && peers=$$(bash hack/peers.sh) && chromium=$$(bash hack/chromium.sh) && \
	export $(WORK) $(RACE) KUBEBUILDER_ASSETS=$$assets AUTHVAULT_PEERS=$$peers AUTHVAULT_CHROMIUM=$$chromium && \
	mkdir -p bin && rm -f bin/go-test-long.log && \
	{ $(TIMED) go-test-build $(GO) test -race -vet=off -count=1 -run '^$$' $(TEST_EXEC) $(LONG) >bin/go-test-long.log 2>&1 || \
		{ cat bin/go-test-long.log; exit 1; }; } && \
	{ AUTHVAULT_LABEL_FILTER=long $(TIMED) go-test-long $(GO) test -race -vet=off -count=1 -timeout 30m $(TEST_EXEC) $(LONG) >bin/go-test-long.log 2>&1 & long_pid=$$!; } && \
	AUTHVAULT_LABEL_FILTER='!long' $(TIMED) go-test $(GO) test -race -vet=off -count=1 -p $(TEST_P) -timeout 30m $(TEST_EXEC) $(PKGS); \
	rc=$$?; \
	GOWORK=off $(TIMED) go-test-flux $(GO) -C $(FLUX_PEER) test -race -count=1 -timeout 10m ./...; \
	flux=$$?; long=0; \
	if [ -n "$${long_pid:-}" ]; then wait $$long_pid; long=$$?; cat bin/go-test-long.log; fi; \
	[ $$rc = 0 ] && [ $$flux = 0 ] && [ $$long = 0 ]

# The supported controller-runtime minors newer than the oldest, which
# go.mod requires so that adding authvault never upgrades a user's: each
# with the client-go it requires (CONTROLLER_RUNTIME:CLIENT_GO). compat
# builds and vets every module with each, and runs the unit tests whose
# test binary holds a package of another version with it: a test whose
# code and libraries are all the same runs the same, once, under -race in
# gotest; so do the integration suites (hack/compat.sh says which and why).
# The minors run side by side, each into bin/compat-MINOR.log, printed
# when all have ended: most of their time is tests waiting on timers and
# servers, and their builds share no Kubernetes package with each other.
KUBE_NEWER := v0.24.1:v0.36.6 v0.25.2:v0.37.2
compat:
	@$(TIMED) compat-wait bash -c 'for cr; do bash hack/background.sh wait compat-build-$$cr || \
		echo "compat: its background build failed; the run below builds again and says why" >&2; done' - \
		$(foreach pair,$(KUBE_NEWER),$(firstword $(subst :, ,$(pair)))); \
	bash hack/tools.sh wait && \
	assets=$$(bash hack/envtest.sh) && peers=$$(bash hack/peers.sh) && \
	mkdir -p bin && pids= && \
	for pair in $(KUBE_NEWER); do \
		cr=$${pair%%:*}; \
		{ KUBEBUILDER_ASSETS=$$assets AUTHVAULT_PEERS=$$peers $(TIMED) compat-$$cr bash hack/compat.sh $$cr $${pair##*:} $(PKGS) >bin/compat-$$cr.log 2>&1 & }; \
		pids="$$pids $$!"; \
	done; \
	rc=0; for pid in $$pids; do wait $$pid || rc=1; done; \
	for pair in $(KUBE_NEWER); do cat bin/compat-$${pair%%:*}.log; done; \
	exit $$rc

# compat's builds (hack/compat.sh --build: the vet, and the compilation of
# each minor's Kubernetes stack and the test packages compat runs) start
# in the background before gotest, at the lowest CPU priority (nice 19):
# they run on what the cores leave idle while the tests wait on servers
# and timers, and yield the cores when the tests need them. They only fill
# the build cache: compat waits for them (two go commands compiling the
# same packages at once would each compile them), then vets and builds
# again, from the cache, and a failure is its own to report.
compat-build:
	@for pair in $(KUBE_NEWER); do \
		cr=$${pair%%:*}; \
		bash hack/background.sh start compat-build-$$cr nice -n 19 bash hack/compat.sh --build $$cr $${pair##*:} $(PKGS) || exit 1; \
	done

# make test runs compat and soak-check at once: the soak's two minutes of
# faults wait on the clock, not on the processor. The soak's output
# follows compat's.
compat-and-soak:
	@mkdir -p bin; \
	{ $(MAKE) --no-print-directory soak-check >bin/soak-check.log 2>&1 & }; soak=$$!; \
	$(MAKE) --no-print-directory compat; rc=$$?; \
	wait $$soak; s=$$?; cat bin/soak-check.log; [ $$rc = 0 ] && [ $$s = 0 ]

# Each stage's time beside its budget (hack/stages.sh): a stage past twice
# its budget gets a warning line, never a failure, since the machine's
# speed must not fail the suite. The budgets are seconds on a warm, idle
# two-core machine; a fresh one also builds the envtest and peer binaries
# and compiles the dependencies once.
# compat-build has none: at nice 19 in the background, its time says how
# busy the tests kept the cores; were it slow, compat-wait (compat waiting
# for it) would show it.
STAGE_BUDGETS := vet:30 staticcheck:60 tools:900 go-test-build:30 go-test:400 go-test-flux:120 go-test-long:300 compat-wait:30 compat-v0.24.1:250 compat-v0.25.2:250 soak-check:240
stages-reset:
	@bash hack/stages.sh reset
stages:
	@bash hack/stages.sh report $(STAGE_BUDGETS)

# make release VERSION=vX.Y.Z: the release commit (every cloud module
# requires the root at VERSION) and the tags of every published module
# (VERSION, cloud/<name>/VERSION), made locally after hack/release's checks
# (semver, not tagged, a CHANGELOG.md section, a clean main, gorelease
# against the previous release); it pushes nothing. In the repository, each
# cloud module keeps beside that requirement a replace of the root by
# ../..: the go command ignores a dependency's replace, so users get the
# released root, while work here builds every module against the working
# tree. A go.work would do the latter too, but go mod tidy ignores it and
# would then look for the root's unreleased version on a proxy. VERSION
# reaches the tool through the environment, not pasted into the recipe, so
# that a quote in it cannot end the shell's string and run what follows.
release:
	@$(GO) run ./hack/release -version "$$VERSION"

# The go-test stage (gotest: the library, the demo, the cloud modules) with
# $(BUSY) busy loops beside it, as on a CI runner shared with other builds:
# run it before landing a test that waits on time, and when a test flakes. A
# test that passes alone and fails here measures the machine's speed. Not
# part of make test (it takes longer, by design).
BUSY ?= 2
test-loaded:
	@BUSY=$(BUSY) $(TIMED) test-loaded bash hack/busy.sh $(MAKE) --no-print-directory gotest

# Benchmarks: figures go to docs/benchmarks.md. Those against the
# embedded API server (addonauth and its peer) need the envtest binaries.
# The fleet's scale benchmark takes about 4 min a run, and its federated
# one (1,000 members through a token life and a quarter) 5 min, past go test's
# default timeout at -count 5: they run once, on their own. So do the cloud
# modules' (native logins against the peers' exec plugins, which need
# hack/peers.sh's binaries; a rotation of a thousand EKS clusters through
# the plugin takes about 30 s).
bench:
	@assets=$$(bash hack/envtest.sh) && \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -run '^$$' -bench . -skip 'BenchmarkFleetRotation|BenchmarkFederatedFleet' -benchmem -count 5 ./... && \
	$(GO) test -run '^$$' -bench 'BenchmarkFleetRotation|BenchmarkFederatedFleet' -benchmem -count 1 -timeout 30m ./fleet && \
	peers=$$(bash hack/peers.sh) && \
	for m in $(CLOUD); do AUTHVAULT_PEERS=$$peers $(GO) -C $$m test -run '^$$' -bench . -benchmem -count 1 -timeout 30m ./... || exit 1; done && \
	$(MAKE) --no-print-directory bench-flux

# Flux's auth beside ours on one hub and member (hack/peers/flux):
# per token rotation and reconcile, the requests arriving at the hub and
# the member, a controller-runtime cache's relists, allocations and the
# time to a usable config.
bench-flux:
	@assets=$$(bash hack/envtest.sh) && \
	KUBEBUILDER_ASSETS=$$assets GOWORK=off $(GO) -C $(FLUX_PEER) test -run '^$$' -bench . -benchmem -count 1 ./...

# A sharded fleet (fleet.Shards) of three replica processes over 1,000
# kubeconfig Secrets on the embedded API server, then a kill -9, a fourth
# replica joining and one cut from the hub (hack/shardbench, about 5 min),
# then 10,000 clusters over five replicas started together (-scale, about
# 3 min): the figures docs/benchmarks.md reports. It fails when a goal is
# missed.
bench-shards:
	@assets=$$(bash hack/envtest.sh) && \
	$(GO) build -o bin/authvault-shardbench ./hack/shardbench && \
	KUBEBUILDER_ASSETS=$$assets ./bin/authvault-shardbench -dir bin/shardbench && \
	KUBEBUILDER_ASSETS=$$assets ./bin/authvault-shardbench -scale -dir bin/shardbench-scale

# The shards' model test for long: make test runs 30 random schedules of
# it under -race; this runs MODEL_SHARDS (20,000: about fifteen minutes on
# two cores) without, and prints its steps per second. A failure names its
# seed: go test -run TestShardModel ./fleet/internal/shard -shardmodel.seed=N -v.
MODEL_SHARDS ?= 20000
model-shards:
	$(GO) test -count=1 -timeout 60m -run 'TestShardModel$$' -v ./fleet/internal/shard -shardmodel.runs=$(MODEL_SHARDS)

# A short fuzzing pass over every parser (the cloud modules' too: a
# kubeconfig's exec arguments and environment, read by their native
# logins), and over the vault's state machine (the model test's driver, see
# vault/model_test.go); the seed corpus lives in testdata.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzModel -fuzztime $(FUZZTIME) ./vault
	$(GO) test -run '^$$' -fuzz FuzzValidate -fuzztime $(FUZZTIME) ./login
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./internal/pemdata
	$(GO) test -run '^$$' -fuzz FuzzParseExecCredential -fuzztime $(FUZZTIME) ./handlers
	$(GO) test -run '^$$' -fuzz FuzzJWTExpiry -fuzztime $(FUZZTIME) ./handlers/internal/kubeconf
	$(GO) test -run '^$$' -fuzz FuzzParseProviders -fuzztime $(FUZZTIME) ./fleet
	$(GO) test -run '^$$' -fuzz FuzzAccessFor -fuzztime $(FUZZTIME) ./fleet
	$(GO) test -run '^$$' -fuzz FuzzProfileArgs -fuzztime $(FUZZTIME) ./fleet
	$(GO) -C cloud/eks test -run '^$$' -fuzz FuzzNativeOptions -fuzztime $(FUZZTIME) .
	$(GO) -C cloud/gke test -run '^$$' -fuzz FuzzNativeOptions -fuzztime $(FUZZTIME) .
	$(GO) -C cloud/aks test -run '^$$' -fuzz FuzzNativeGetToken -fuzztime $(FUZZTIME) .

# The rotation demo: three scenarios (revocation, expiry with a plugin that
# takes 1 s, an issuer outage), each through a vault and through plain
# client-go at once, on an embedded kube-apiserver (~2.5 min); it prints a
# table per scenario, writes the chart to bin/rotation-demo.svg and the
# figures, with the machine they ran on, to bin/rotation-demo.json (the
# README's come from docs/demo.json, a run's copy). Builds the envtest
# binaries first when missing.
DEMO_FLAGS ?=
demo:
	@assets=$$(bash hack/envtest.sh) && \
	$(WORK) $(GO) -C $(DEMO) build -o $(CURDIR)/bin/rotation-demo . && \
	KUBEBUILDER_ASSETS=$$assets ./bin/rotation-demo --chart bin/rotation-demo.svg --json bin/rotation-demo.json $(DEMO_FLAGS)

# The soak (hack/soak): one process with everything of authvault's — a
# vault with a slow exec plugin and a token file, a fleet of 50 clusters
# from kubeconfig Secrets and ClusterProfiles, addonauth and its callers, a
# manager with leader election — with a second replica of its fleet that
# shares the clusters on Leases (the shard peer, killed and started again as
# one of the faults), and beside them the same workload through
# plain client-go, against the embedded API server, while faults come on a
# schedule for $(SOAK_DURATION); then quiet until the authvault side is back
# at its baseline. It writes the report and the chart to $(SOAK_DIR) and
# fails on a failure no fault explains, a leaked token, a side that does
# not come back to its baseline, or (from 20 min on) one whose goroutines,
# descriptors, connections or heap grow over the run's second half.
# soak-check, in make test, is the same for two minutes of faults (about
# five minutes in all), so that the soak itself keeps working; without
# -race, which its sides' own tests (soak-test, in gotest) run under.
SOAK_DURATION ?= 60m
SOAK_DIR      ?= bin/soak
SOAK_FLAGS    ?=
soak:
	@assets=$$(bash hack/envtest.sh) && \
	$(WORK) $(GO) -C $(SOAK) build -o $(CURDIR)/bin/authvault-soak . && \
	KUBEBUILDER_ASSETS=$$assets SOAK_DURATION=$(SOAK_DURATION) ./bin/authvault-soak --dir $(SOAK_DIR) $(SOAK_FLAGS)

soak-check:
	@assets=$$(bash hack/envtest.sh) && \
	$(WORK) $(GO) -C $(SOAK) build -o $(CURDIR)/bin/authvault-soak . && \
	KUBEBUILDER_ASSETS=$$assets $(TIMED) soak-check ./bin/authvault-soak --duration 2m --dir bin/soak-check

# A cluster to try authvault on (hack/cluster): the kube-apiserver and etcd
# the tests use, with a token issuer that can revoke. It writes
# $(CLUSTER_DIR)/kubeconfig, prints the command that runs the quickstart
# against it, and stays up until Ctrl-C. The first run builds the envtest
# binaries (about 5 min on two cores); later ones start in seconds.
CLUSTER_DIR ?= bin/cluster
cluster:
	@assets=$$(bash hack/envtest.sh) && \
	$(BUILD_CLUSTER) && \
	KUBEBUILDER_ASSETS=$$assets exec ./bin/authvault-cluster --dir $(CLUSTER_DIR)

# Builds hack/cluster into bin/authvault-cluster, saying so, with a line
# every 20 s: a fresh clone compiles the Kubernetes libraries for it first,
# minutes with nothing else to see (the loop ends with its shell, which a
# Ctrl-C during the build ends too).
BUILD_CLUSTER = echo "building hack/cluster (a fresh clone compiles the Kubernetes libraries first: a few minutes on two cores) ..." && \
	{ while sleep 20 && kill -0 $$$$ 2>/dev/null; do echo "still building hack/cluster ..."; done & } && ticker=$$! && \
	{ $(GO) build -o bin/authvault-cluster ./hack/cluster; rc=$$?; kill $$ticker; wait $$ticker 2>/dev/null; [ $$rc = 0 ]; }

# The browser walk-through (hack/cluster --dashboard): the cluster above,
# with examples/dashboard behind addon-proxy as the APIService
# v1.dashboard.authvault.dev and kubectl proxy on 127.0.0.1:8001 (the
# user's kubectl, or hack/envtest.sh's); it prints the URL to open and
# stays up until Ctrl-C. DASHBOARD_PROXY_PORT picks kubectl proxy's port
# when 8001 is taken. A fresh clone compiles the Kubernetes libraries for
# the program, then for addon-proxy: minutes, with a line every 20 s
# (BUILD_CLUSTER); later runs print the URL in about 20 s.
DASHBOARD_PROXY_PORT ?= 8001
dashboard:
	@assets=$$(bash hack/envtest.sh) && \
	$(BUILD_CLUSTER) && \
	KUBEBUILDER_ASSETS=$$assets exec ./bin/authvault-cluster --dir $(CLUSTER_DIR) --dashboard --proxy-port $(DASHBOARD_PROXY_PORT)

# Revokes the running cluster's token: the cluster writes a new one into
# $(CLUSTER_DIR)/token, and the API server refuses the old one within 10 s.
# It says what it did once the new token is written (within 5 s).
# A hub and a member cluster whose API server trusts the hub's
# ServiceAccount tokens (docs/federation.md): the files of make cluster, and
# member-server and member-ca.crt beside them.
cluster-pair:
	@assets=$$(bash hack/envtest.sh) && \
	$(BUILD_CLUSTER) && \
	KUBEBUILDER_ASSETS=$$assets exec ./bin/authvault-cluster --dir $(CLUSTER_DIR) --member

cluster-revoke:
	@pid=$$(cat $(CLUSTER_DIR)/pid 2>/dev/null); \
	case "$$(ps -o args= -p "$${pid:-0}" 2>/dev/null)" in \
	*authvault-cluster*) ;; \
	*) echo "no cluster is running in $(CLUSTER_DIR): start one with make cluster" >&2; exit 1 ;; \
	esac; \
	token() { cksum <$(CLUSTER_DIR)/token 2>/dev/null; }; \
	before=$$(token); kill -USR1 "$$pid" || exit 1; \
	for _ in $$(seq 50); do [ "$$(token)" != "$$before" ] && break; sleep 0.1; done; \
	if [ "$$(token)" != "$$before" ]; then \
		echo "revoked the token of the cluster in $(CLUSTER_DIR) (pid $$pid): the API server refuses it within 10 s; the new one is in $(CLUSTER_DIR)/token"; \
	else \
		echo "sent the cluster (pid $$pid) SIGUSR1, but $(CLUSTER_DIR)/token has not changed within 5 s: see the cluster's terminal" >&2; exit 1; \
	fi
