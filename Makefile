# The two commands a newcomer needs: `make demo` and `make test`.
CARGO ?= cargo
KUBECONFIG_OUT ?= target/cluster/kubeconfig

.PHONY: all test demo demo-paperclip contract contract-full cluster bench bench-cluster lint fmt toolchain component fixtures

COMPONENT := target/wasm32-wasip2/component/kubernetes_provider.wasm
REFERENCE_COMPONENT := target/wasm32-wasip2/component/reference_provider.wasm

all: test

## Install the pinned toolchain (rust-toolchain.toml: Rust, wasm32-wasip2, rustfmt, clippy).
toolchain:
	@rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
	@rustup show active-toolchain

## The provider components (profile `component`, see Cargo.toml): $(COMPONENT) and $(REFERENCE_COMPONENT).
component: toolchain
	$(CARGO) build -p kubernetes-provider -p reference-provider --target wasm32-wasip2 --profile component

## The hostile guest the host's tests load: target/wasm32-wasip2/component/hostile_provider.wasm.
fixtures: toolchain
	$(CARGO) build -p hostile-provider --target wasm32-wasip2 --profile component

## Build the components and everything else, then run every test.
test: component fixtures
	$(CARGO) test --workspace

## The provider's lease lifecycle on each backend, on the embedded cluster. For a real cluster,
## name its kubeconfig on the command line: `make demo KUBECONFIG=~/.kube/config` (an exported
## KUBECONFIG alone never sends the demo to a real cluster).
demo: component
	$(CARGO) run --quiet -p host-harness -- demo $(if $(filter command line,$(origin KUBECONFIG)),--kubeconfig $(KUBECONFIG)) $(DEMO_ARGS)

## A Paperclip-shaped run: a stand-in for the Paperclip server drives the plugin worker
## (paperclip-plugin/) over its JSON-RPC on stdio; the worker runs the component in a
## `sandbox-host serve` child against the embedded cluster. Needs node and npm.
demo-paperclip: component
	$(CARGO) build --quiet -p host-harness
	cd paperclip-plugin && npm ci --no-audit --no-fund --loglevel=error && \
		SANDBOX_HOST_BIN=$(CURDIR)/target/debug/sandbox-host SANDBOX_HOST_COMPONENT=$(CURDIR)/$(COMPONENT) npm run --silent demo

## The contract suite and its fault matrix on the provider, printed as tables (`make test` runs
## them too). `make contract KUBECONFIG=~/.kube/config` holds it to a real cluster (the fault
## cells are skipped there); CONTRACT_ARGS passes more flags (`--json`, `--component X.wasm`).
contract: component
	$(CARGO) run --quiet -p host-harness -- contract $(if $(filter command line,$(origin KUBECONFIG)),--kubeconfig $(KUBECONFIG)) $(CONTRACT_ARGS)

## The suite and the matrix on each Sandbox API version alone, as well as on both.
contract-full: component
	$(CARGO) run --quiet -p host-harness -- contract $(CONTRACT_ARGS)
	$(CARGO) run --quiet -p host-harness -- contract --sandbox-versions v1beta1 $(CONTRACT_ARGS)
	$(CARGO) run --quiet -p host-harness -- contract --sandbox-versions v1alpha1 $(CONTRACT_ARGS)

## Serve the embedded cluster in the foreground and write a kubeconfig.
cluster: toolchain
	$(CARGO) run --quiet -p host-harness -- cluster --kubeconfig $(KUBECONFIG_OUT) $(CLUSTER_ARGS)

## Every figure of BENCHMARKS.md in one run (release build): component sizes and load times,
## per-call costs, WASM / native, readiness, requests per operation, load, faults under load,
## a CLI call's cold start. BENCH_QUICK=1 for a smoke run; BENCH_ONLY=load,faults for some
## sections; BENCH_LIFECYCLES, BENCH_CONCURRENCY; see host-harness/bench/src/lib.rs.
bench: component fixtures
	$(CARGO) build --release -p host-harness
	$(CARGO) bench -p provider-bench --bench report

## Throughput and memory of the embedded cluster alone (BENCH_SANDBOXES=N live Sandboxes).
bench-cluster: toolchain
	$(CARGO) bench -p embedded-cluster --bench cluster

## Formatting and clippy, warnings as errors.
lint: toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p kubernetes-provider -p reference-provider -p hostile-provider --target wasm32-wasip2 -- -D warnings

fmt:
	$(CARGO) fmt --all
