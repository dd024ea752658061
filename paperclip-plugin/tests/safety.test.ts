// What the plugin refuses, and how it fails: a kubeconfig that would run a program on the
// worker's machine, ambient credentials the operator did not allow, a sandbox-host that cannot
// start, a request larger than the host takes. Every refusal says what to fix, quotes no
// secret, and leaves nothing hanging.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import type { EnvironmentTestHarness } from "@paperclipai/plugin-sdk/testing";

import { DRIVER_KEY } from "../src/manifest.js";
import plugin from "../src/plugin.js";
import { harness, instanceConfig } from "./support.js";

let scratch: string;

before(() => {
  scratch = mkdtempSync(join(tmpdir(), "paperclip-plugin-safety-"));
});

after(async () => {
  await plugin.definition.onShutdown?.();
  rmSync(scratch, { recursive: true, force: true });
});

/** A kubeconfig of a cluster nobody serves. */
const UNREACHABLE_KUBECONFIG = [
  "apiVersion: v1", "kind: Config", "current-context: c",
  "contexts:", "- name: c", "  context: {cluster: k, user: u}",
  "clusters:", "- name: k", "  cluster: {server: 'https://127.0.0.1:1'}",
  "users:", "- name: u", "  user: {token: t}",
].join("\n");

const config = (extra: Record<string, unknown>) => ({ namespace: "default", image: "busybox:1.36", backend: "job", ...extra });

async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

test("a kubeconfig whose user runs a program is refused, and the program never runs", async () => {
  const h: EnvironmentTestHarness = await harness(instanceConfig(join(scratch, "cache")));
  const marker = join(scratch, "ran");
  const kubeconfig = [
    "apiVersion: v1", "kind: Config", "current-context: c",
    "contexts:", "- name: c", "  context: {cluster: k, user: u}",
    "clusters:", "- name: k", "  cluster: {server: 'https://127.0.0.1:1'}",
    "users:", "- name: u", "  user:", "    exec:", "      apiVersion: client.authentication.k8s.io/v1",
    "      command: /bin/sh", `      args: ['-c', 'touch ${marker} # token-5e1']`,
  ].join("\n");
  const v = await within(30_000, "validateConfig", h.validateConfig({ driverKey: DRIVER_KEY, config: config({ kubeconfig }) }));
  assert.equal(v.ok, false);
  const message = (v.errors ?? []).join("; ");
  assert.match(message, /users\["u"\]\.exec is refused: it runs a program/);
  assert.ok(!message.includes("token-5e1"), message);
  assert.equal(existsSync(marker), false, "the exec plugin never ran");
});

test("without a kubeconfig an environment validates, and its probe and acquire are refused unless the operator allows ambient credentials", async () => {
  const h = await harness(instanceConfig(join(scratch, "cache")));
  const v = await h.validateConfig({ driverKey: DRIVER_KEY, config: config({}) });
  assert.equal(v.ok, true, `validation has no company, so no operator setting to check: ${JSON.stringify(v)}`);
  const probe = await h.probe({ driverKey: DRIVER_KEY, companyId: "c-1", environmentId: "e-1", config: config({}) });
  assert.equal(probe.ok, false);
  assert.match(probe.summary ?? "", /^\/kubeconfig: is required: the operator has not let environments use the worker's own credentials/);
  await assert.rejects(h.acquireLease({ driverKey: DRIVER_KEY, companyId: "c-1", environmentId: "e-1", config: config({}), runId: "r-1" }), /invalid-config at \/kubeconfig: is required/);
});

test("a sandbox-host that cannot start fails calls at once, and shutdown does not hang", async () => {
  const h = await harness(instanceConfig(join(scratch, "cache")));
  const kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n";
  const packaged = process.env.SANDBOX_HOST_BIN;
  process.env.SANDBOX_HOST_BIN = join(scratch, "no-such-sandbox-host");
  try {
    const v = await within(10_000, "validateConfig", h.validateConfig({ driverKey: DRIVER_KEY, config: config({ kubeconfig }) }));
    assert.equal(v.ok, false);
    assert.match((v.errors ?? []).join("; "), /cannot start sandbox-host at .*no-such-sandbox-host \(spawn .* ENOENT\)/);
    await within(10_000, "a second call", h.validateConfig({ driverKey: DRIVER_KEY, config: config({ kubeconfig }) }));
  } finally {
    process.env.SANDBOX_HOST_BIN = packaged;
  }
  await within(10_000, "shutdown", plugin.definition.onShutdown!());
});

test("a request larger than sandbox-host takes is refused in the worker, not left unanswered", async () => {
  const limits = join(scratch, "limits.json");
  writeFileSync(limits, JSON.stringify({ "max-input-bytes": 1000 }));
  const h = await harness({ ...instanceConfig(join(scratch, "cache")), limitsFile: limits });
  // A cluster nobody serves: the request never leaves the worker.
  const kubeconfig = UNREACHABLE_KUBECONFIG;
  const probe = await within(30_000, "probe", h.probe({ driverKey: DRIVER_KEY, companyId: "c-1", environmentId: "e-1", config: config({ kubeconfig, labels: { big: "x".repeat(200_000) } }) }));
  assert.equal(probe.ok, false);
  assert.match(probe.summary ?? "", /request-too-large: the probe request is \d+ bytes; sandbox-host takes at most \d+/);
});

test("the operator's ownership key reaches sandbox-host: one others may read is refused, none at all is warned of", async () => {
  const kubeconfig = UNREACHABLE_KUBECONFIG;
  const secretKey = "safety-test-ownership-key-0123456789abcdef";
  const shared = join(scratch, "shared-key");
  writeFileSync(shared, `${secretKey}\n`, { mode: 0o644 });
  const refused = await harness({ ...instanceConfig(join(scratch, "cache")), ownershipKeyFile: shared });
  const probe = await within(30_000, "probe", refused.probe({ driverKey: DRIVER_KEY, companyId: "c-1", environmentId: "e-key", config: config({ kubeconfig }) }));
  assert.equal(probe.ok, false);
  assert.match(JSON.stringify(probe), /may be read by others .*chmod 600/);
  assert.ok(!JSON.stringify(probe).includes(secretKey), "the key is never quoted");

  const unsigned = await harness(instanceConfig(join(scratch, "cache")));
  const warned = await within(30_000, "probe", unsigned.probe({ driverKey: DRIVER_KEY, companyId: "c-1", environmentId: "e-nokey", config: config({ kubeconfig }) }));
  assert.ok((warned.diagnostics ?? []).some((d) => d.code === "unsigned-ownership" && d.severity === "warning"), JSON.stringify(warned));
});
