# The two commands a newcomer needs: `make demo` and `make test`.
CARGO ?= cargo
KUBECONFIG_OUT ?= target/cluster/kubeconfig

.PHONY: all test demo demo-paperclip paperclip-plugin paperclip-lane contract contract-full cluster bench lane-setup bench-cluster lint fmt toolchain component fixtures

COMPONENT := target/wasm32-unknown-unknown/component/provider.wasm
REFERENCE_COMPONENT := target/wasm32-wasip2/component/reference_provider.wasm

all: test

## Install the pinned toolchain (rust-toolchain.toml: Rust, wasm32-unknown-unknown, wasm32-wasip2,
## rustfmt, clippy).
toolchain:
	@rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
	@rustup show active-toolchain

## The provider components (profile `component`, see Cargo.toml): $(COMPONENT) and $(REFERENCE_COMPONENT).
## The provider is built alone, as sandbox-host's build script builds it to carry it, so both
## builds share one set of artifacts (built with the reference provider, its dependencies would
## get other features and be compiled twice). The provider is built for wasm32-unknown-unknown,
## so it imports no WASI but the clocks it reads (provider/Cargo.toml); the reference provider
## stands for providers written against wasm32-wasip2's std.
component: toolchain
	$(CARGO) build -p provider --target wasm32-unknown-unknown --profile component
	$(CARGO) build -p reference-provider --target wasm32-wasip2 --profile component

## The hostile guest the host's tests load: target/wasm32-wasip2/component/hostile_provider.wasm.
fixtures: toolchain
	$(CARGO) build -p hostile-provider --target wasm32-wasip2 --profile component

## The installable Paperclip plugin package, $(PLUGIN_PACKAGE): the built worker and its
## dependencies, the provider component and this platform's sandbox-host (release build;
## PLUGIN_PROFILE=debug packages the debug build). `paperclipai plugin install $(PLUGIN_PACKAGE) --local`
## installs it; `npm pack` in it makes the publishable tarball.
## PLUGIN_PROVIDER=reference packages the reference provider instead, as its own plugin
## (sandbox-provider.reference, driver reference-wasm) in target/paperclip-plugin-reference.
PLUGIN_PROFILE ?= release
PLUGIN_PROVIDER ?= kubernetes
PLUGIN_PACKAGE ?= target/paperclip-plugin$(if $(filter reference,$(PLUGIN_PROVIDER)),-reference)
## A debug package (the lane's) is built in one build with sandbox-dev, which the lane runs the
## cluster with: one resolution of the dependencies' features for both, not one each.
paperclip-plugin: component
	$(CARGO) build $(if $(filter release,$(PLUGIN_PROFILE)),--release) -p sandbox-host $(if $(filter debug,$(PLUGIN_PROFILE)),-p sandbox-dev)
	paperclip-plugin/scripts/package.sh $(CURDIR)/$(PLUGIN_PACKAGE) $(CURDIR)/target/$(PLUGIN_PROFILE)/sandbox-host \
		$(if $(filter reference,$(PLUGIN_PROVIDER)),$(CURDIR)/$(REFERENCE_COMPONENT) sandbox-provider.reference reference-wasm "Reference provider",$(CURDIR)/$(COMPONENT))

## The Paperclip plugin against Paperclip itself: installs Node 24 and the real Paperclip server
## (npm `paperclipai`, pinned in the lane's install.sh) under target/paperclip-lane once, packages
## the plugin as an operator installs it, runs the plugin's own tests on Node 24, then the lane
## (paperclip-plugin/lane/README.md): the real server installs the package and runs agents in its
## sandboxes on the embedded cluster.
LANE_NODE := $(CURDIR)/target/paperclip-lane/node24/bin
paperclip-lane: component
	$(MAKE) --no-print-directory lane-setup PLUGIN_PROFILE=debug
	cd paperclip-plugin && PATH=$(LANE_NODE):$$PATH SANDBOX_HOST_BIN=$(CURDIR)/target/debug/sandbox-host \
		SANDBOX_DEV_BIN=$(CURDIR)/target/debug/sandbox-dev \
		SANDBOX_HOST_COMPONENT=$(CURDIR)/$(COMPONENT) npm test
	cd paperclip-plugin && \
		SANDBOX_DEV_BIN=$(CURDIR)/target/debug/sandbox-dev PAPERCLIP_PLUGIN_DIR=$(CURDIR)/$(PLUGIN_PACKAGE) node --test --test-concurrency=1 --test-reporter=spec dist/lane/

## What the lane runs on: Node 24 and Paperclip (installed once), both plugin packages in
## PLUGIN_PROFILE (`make test` packages the debug build, `make bench` the release one), the
## lane compiled.
lane-setup: component
	bash paperclip-plugin/lane/install.sh
	$(MAKE) --no-print-directory paperclip-plugin
	$(MAKE) --no-print-directory paperclip-plugin PLUGIN_PROVIDER=reference
	cd paperclip-plugin && npx tsc -p lane/tsconfig.json

## Build the components and everything else, then run every test (the Paperclip lane last).
test: component fixtures
	$(CARGO) test --workspace
	$(MAKE) --no-print-directory paperclip-lane

## The provider's lease lifecycle on each backend, on the embedded cluster. For a real cluster,
## name its kubeconfig on the command line: `make demo KUBECONFIG=~/.kube/config` (an exported
## KUBECONFIG alone never sends the demo to a real cluster).
demo: component
	$(CARGO) run --quiet -p sandbox-dev -- demo $(if $(filter command line,$(origin KUBECONFIG)),--kubeconfig $(KUBECONFIG)) $(DEMO_ARGS)

## A Paperclip-shaped run: a stand-in for the Paperclip server drives the plugin worker
## (paperclip-plugin/) over its JSON-RPC on stdio; the worker runs the component in a
## `sandbox-host serve` child against the embedded cluster. Needs node and npm.
demo-paperclip: component
	$(CARGO) build --quiet -p sandbox-host -p sandbox-dev
	cd paperclip-plugin && npm ci --no-audit --no-fund --loglevel=error && \
		SANDBOX_HOST_BIN=$(CURDIR)/target/debug/sandbox-host SANDBOX_DEV_BIN=$(CURDIR)/target/debug/sandbox-dev SANDBOX_HOST_COMPONENT=$(CURDIR)/$(COMPONENT) npm run --silent demo

## The contract suite and its fault matrix on the provider, printed as tables (`make test` runs
## them too). `make contract KUBECONFIG=~/.kube/config` holds it to a real cluster (the fault
## cells are skipped there); CONTRACT_ARGS passes more flags (`--json`, `--component X.wasm`).
contract: component
	$(CARGO) run --quiet -p sandbox-dev -- contract $(if $(filter command line,$(origin KUBECONFIG)),--kubeconfig $(KUBECONFIG)) $(CONTRACT_ARGS)

## The suite and the matrix on each Sandbox API version alone, as well as on both.
contract-full: component
	$(CARGO) run --quiet -p sandbox-dev -- contract $(CONTRACT_ARGS)
	$(CARGO) run --quiet -p sandbox-dev -- contract --sandbox-versions v1beta1 $(CONTRACT_ARGS)
	$(CARGO) run --quiet -p sandbox-dev -- contract --sandbox-versions v1alpha1 $(CONTRACT_ARGS)

## Serve the embedded cluster in the foreground and write a kubeconfig.
cluster: toolchain
	$(CARGO) run --quiet -p sandbox-dev -- cluster --kubeconfig $(KUBECONFIG_OUT) $(CLUSTER_ARGS)

## Every figure of BENCHMARKS.md in one run (release build): execute against a plain exec,
## component sizes and load times, the provider's bytes by crate (from a build that keeps its
## names, profile component-names), per-call costs, WASM / native, the guest's instructions per
## operation, readiness, requests per operation, load, the host's own cost with the cluster in
## another process, faults under load, a CLI call's cold start, and the Paperclip lane's agent
## runs (the lane is run by the report, on what lane-setup prepares). BENCH_QUICK=1 for a smoke run;
## BENCH_ONLY=load,faults for some sections; BENCH_LIFECYCLES, BENCH_CONCURRENCY; see
## host-harness/provider-bench/src/lib.rs.
BENCH_LANE := $(if $(BENCH_ONLY),$(findstring paperclip,$(BENCH_ONLY)),paperclip)
bench: component fixtures
	$(CARGO) build -p provider --target wasm32-unknown-unknown --profile component-names
	$(CARGO) build --release -p sandbox-host -p sandbox-dev
	$(if $(BENCH_LANE),$(MAKE) --no-print-directory lane-setup PLUGIN_PROFILE=release)
	$(CARGO) bench -p provider-bench --bench report

## Throughput and memory of the embedded cluster alone (BENCH_SANDBOXES=N live Sandboxes).
bench-cluster: toolchain
	$(CARGO) bench -p embedded-cluster --bench cluster

## Formatting, clippy and the docs' links, warnings as errors.
lint: toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p provider --target wasm32-unknown-unknown -- -D warnings
	$(CARGO) clippy -p reference-provider -p hostile-provider --target wasm32-wasip2 -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

fmt:
	$(CARGO) fmt --all
