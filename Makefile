# authvault: `make test` runs every check CI runs; `make demo` runs the main job.
GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        ?= ./...

.PHONY: test vet staticcheck fmt-check gotest envtest bench fuzz demo

# Every test: the unit tests and the integration suite against a real
# kube-apiserver, whose binaries hack/envtest.sh builds once (about 5 min on
# two cores) and caches outside the work tree.
test: fmt-check vet staticcheck gotest

TIMED := bash hack/timed.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	@$(TIMED) vet $(GO) vet $(PKGS)

staticcheck:
	@$(TIMED) staticcheck $(GO) run $(STATICCHECK) $(PKGS)

# Prints the directory of the envtest binaries, building them when missing.
envtest:
	@$(TIMED) envtest bash hack/envtest.sh

gotest:
	@assets=$$($(TIMED) envtest bash hack/envtest.sh) && \
	KUBEBUILDER_ASSETS=$$assets $(TIMED) go-test $(GO) test -race -count=1 -timeout 30m $(PKGS)

# Benchmarks: figures go to docs/benchmarks.md. Those against the
# embedded API server (addonauth and its peer) need the envtest binaries.
# The fleet's scale benchmark takes about 4 min a run, past go test's
# default timeout at -count 5: it runs once, on its own.
bench:
	@assets=$$(bash hack/envtest.sh) && \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -run '^$$' -bench . -skip BenchmarkFleetRotation -benchmem -count 5 $(PKGS) && \
	$(GO) test -run '^$$' -bench BenchmarkFleetRotation -benchmem -count 1 -timeout 30m ./fleet

# A short fuzzing pass over every parser; the seed corpus lives in testdata.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzValidate -fuzztime $(FUZZTIME) ./login
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./internal/pemdata
	$(GO) test -run '^$$' -fuzz FuzzParseExecCredential -fuzztime $(FUZZTIME) ./handlers
	$(GO) test -run '^$$' -fuzz FuzzJWTExpiry -fuzztime $(FUZZTIME) ./handlers

# The rotation demo: an operator through the vault on an embedded
# kube-apiserver while tokens are revoked, then the comparison with plain
# client-go. Builds the envtest binaries first when missing.
DEMO_FLAGS ?=
demo:
	@assets=$$(bash hack/envtest.sh) && \
	$(GO) build -o bin/rotation-demo ./examples/rotation-demo && \
	KUBEBUILDER_ASSETS=$$assets ./bin/rotation-demo $(DEMO_FLAGS)
