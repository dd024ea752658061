// What the tests run against: the embedded cluster as its own `sandbox-dev cluster` process
// (so a killed serve child leaves the cluster and its sandboxes alone), and the plugin in the
// SDK's environment test harness.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createEnvironmentTestHarness, type EnvironmentTestHarness } from "@paperclipai/plugin-sdk/testing";

import manifest, { DRIVER_KEY } from "../src/manifest.js";
import plugin from "../src/plugin.js";

/** `sandbox-host` and the component, as `make test` passes them (required: no defaults here). */
export function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through make test (cargo test), which sets it`);
  if (!existsSync(value)) throw new Error(`${name}=${value} does not exist: build it with make component`);
  return value;
}

export const BINARY = required("SANDBOX_HOST_BIN");
required("SANDBOX_HOST_COMPONENT");
/** The test bed's binary: the embedded cluster and its fault injection. */
export const DEV_BINARY = required("SANDBOX_DEV_BIN");

/** A `sandbox-dev cluster` process and its admin kubeconfig. */
export class Cluster {
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly path: string,
    readonly kubeconfig: string,
  ) {}

  /** `kubectl ARGS` on this cluster: its stdout. */
  async kubectl(args: string[]): Promise<string> {
    const child = spawn("kubectl", ["--kubeconfig", this.path, ...args], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    const code = await new Promise((r) => child.once("close", r));
    if (code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${code}`);
    return out;
  }

  /** `sandbox-dev fault add ARGS` on this cluster. */
  async fault(args: string[]): Promise<void> {
    const child = spawn(DEV_BINARY, ["fault", "--kubeconfig", this.path, "add", ...args], { stdio: ["ignore", "ignore", "inherit"] });
    const code = await new Promise((r) => child.once("exit", r));
    if (code !== 0) throw new Error(`sandbox-dev fault add ${args.join(" ")} exited ${code}`);
  }

  /** `sandbox-host pool --name NAME ARGS` on this cluster (namespace `default`). */
  async pool(name: string, args: string[]): Promise<void> {
    const child = spawn(BINARY, ["pool", "--kubeconfig", this.path, "--name", name, ...args], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    const code = await new Promise((r) => child.once("exit", r));
    if (code !== 0) throw new Error(`sandbox-host pool --name ${name} ${args.join(" ")} exited ${code}`);
  }

  static async start(): Promise<Cluster> {
    const dir = mkdtempSync(join(tmpdir(), "paperclip-plugin-test-"));
    const path = join(dir, "kubeconfig");
    const child = spawn(DEV_BINARY, ["cluster", "--port", "0", "--kubeconfig", path], { stdio: ["ignore", "ignore", "inherit"] });
    const deadline = Date.now() + 60_000;
    while (!existsSync(path) || readFileSync(path, "utf8").length === 0) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error("sandbox-dev cluster wrote no kubeconfig");
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 100));
    return new Cluster(child, dir, path, readFileSync(path, "utf8"));
  }

  async stop(): Promise<void> {
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.kill("SIGTERM");
    await exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The operator's plugin config of the tests (the programs come from SANDBOX_HOST_BIN and SANDBOX_HOST_COMPONENT; the cluster from SANDBOX_DEV_BIN). */
export function instanceConfig(cacheDir: string): Record<string, unknown> {
  return { allowedNamespaces: ["default"], cacheDir };
}

/** The plugin's hooks in the SDK's environment harness, after `setup` with its context. */
export async function harness(instance: Record<string, unknown>): Promise<EnvironmentTestHarness> {
  const d = plugin.definition;
  const h = createEnvironmentTestHarness({
    manifest,
    config: instance,
    environmentDriver: {
      driverKey: DRIVER_KEY,
      onValidateConfig: d.onEnvironmentValidateConfig,
      onProbe: d.onEnvironmentProbe,
      onAcquireLease: d.onEnvironmentAcquireLease,
      onResumeLease: d.onEnvironmentResumeLease,
      onReleaseLease: d.onEnvironmentReleaseLease,
      onDestroyLease: d.onEnvironmentDestroyLease,
      onExecute: d.onEnvironmentExecute,
      onRealizeWorkspace: d.onEnvironmentRealizeWorkspace,
    },
  });
  await d.setup(h.ctx);
  return h;
}

/** The processes the plugin's health check reports (validation's offline one with `all`). */
export async function serveProcesses(all = false): Promise<{ purpose: string; pid: number | null; starts: number }[]> {
  const health = await plugin.definition.onHealth?.();
  const processes = (health?.details?.processes ?? []) as { purpose: string; pid: number | null; starts: number }[];
  return all ? processes : processes.filter((p) => p.purpose === "company");
}
