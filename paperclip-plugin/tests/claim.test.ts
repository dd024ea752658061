// The claim backend through the plugin: the operator's allowedWarmPools reaches the host's
// policy, so an environment's claim on a listed pool adopts a warm Sandbox and a claim on any
// other pool is refused before anything is written.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { assertLeaseLifecycle, type EnvironmentTestHarness } from "@paperclipai/plugin-sdk/testing";

import { DRIVER_KEY } from "../src/manifest.js";
import plugin from "../src/plugin.js";
import { Cluster, harness, instanceConfig } from "./support.js";

const LISTED = "pc-listed";
const UNLISTED = "pc-unlisted";
let cluster: Cluster;
let cache: string;
let h: EnvironmentTestHarness;

before(async () => {
  cluster = await Cluster.start();
  cache = mkdtempSync(join(tmpdir(), "paperclip-plugin-cache-"));
  for (const pool of [LISTED, UNLISTED]) await cluster.pool(pool, ["create", "--replicas", "1"]);
  h = await harness({ ...instanceConfig(cache), allowedWarmPools: [LISTED] });
});

after(async () => {
  await plugin.definition.onShutdown?.();
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
});

const base = (environmentId: string, pool: string) => ({
  driverKey: DRIVER_KEY,
  companyId: "company-1",
  environmentId,
  config: { namespace: "default", backend: "claim", claim: { warmPool: pool }, kubeconfig: cluster.kubeconfig },
});

test("a claim on a pool the operator listed adopts a warm Sandbox and lives its whole life", async () => {
  const lease = await h.acquireLease({ ...base("env-warm", LISTED), runId: "run-1", agentId: "agent-1" });
  assert.match(lease.providerLeaseId ?? "", /^k8s:claim:default:/);
  const claimed = (lease.metadata?.kubernetesSandbox as { lease: Record<string, unknown> }).lease["claimed-sandbox"];
  assert.equal((claimed as { warm?: boolean } | undefined)?.warm, true, JSON.stringify(lease.metadata));
  assert.match(String((claimed as { name?: string }).name), new RegExp(`^${LISTED}-`), "a member of the listed pool");
  await h.releaseLease({ ...base("env-warm", LISTED), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  assertLeaseLifecycle(h.environmentEvents, "env-warm");
  assert.equal(await cluster.kubectl(["get", "sandboxclaims", "-n", "default", "-o", "name"]), "", "the claim is gone");
});

test("a claim on a pool the operator did not list is refused and writes nothing", async () => {
  await assert.rejects(
    h.acquireLease({ ...base("env-cold", UNLISTED), runId: "run-2", agentId: "agent-2" }),
    (e: Error) => e.message.includes(UNLISTED) && /warm pool/i.test(e.message),
  );
  assert.equal(await cluster.kubectl(["get", "sandboxclaims", "-n", "default", "-o", "name"]), "", "no claim was made");
});
