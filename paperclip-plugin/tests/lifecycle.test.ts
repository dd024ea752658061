// The plugin in the SDK's environment harness against the embedded cluster, with an ownership
// key: config checks with paths, a whole lease life (assertLeaseLifecycle), a retried acquire that adopts, an
// expired lease as the SDK expects, a fresh acquire after it, requestedExpiresAt, and a
// killed sandbox-host serve restarted without losing a lease.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { assertLeaseLifecycle, type EnvironmentTestHarness } from "@paperclipai/plugin-sdk/testing";

import { DRIVER_KEY } from "../src/manifest.js";
import plugin from "../src/plugin.js";
import { Cluster, harness, instanceConfig, serveProcesses } from "./support.js";

const SECRET = "pc-secret-value-42";
let cluster: Cluster;
let cache: string;
let h: EnvironmentTestHarness;
let config: Record<string, unknown>;

before(async () => {
  cluster = await Cluster.start();
  cache = mkdtempSync(join(tmpdir(), "paperclip-plugin-cache-"));
  // Signed ownership, as an operator should run it.
  const ownershipKeyFile = join(cache, "ownership-key");
  writeFileSync(ownershipKeyFile, "plugin-test-ownership-key-0123456789abcdef\n", { mode: 0o600 });
  h = await harness({ ...instanceConfig(cache), ownershipKeyFile });
  config = {
    namespace: "default",
    image: "busybox:1.36",
    backend: "job",
    kubeconfig: cluster.kubeconfig,
    secretEnv: { TOKEN: SECRET },
    timeoutMs: 60_000,
  };
});

after(async () => {
  await plugin.definition.onShutdown?.();
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
});

const base = (environmentId: string) => ({ driverKey: DRIVER_KEY, companyId: "company-1", environmentId, config });

test("validateConfig reports every problem with its path and keeps Paperclip's keys", async () => {
  const bad = await h.validateConfig({ driverKey: DRIVER_KEY, config: { ...config, image: "", backend: "vm", secretEnv: { A: 1 } } });
  assert.equal(bad.ok, false);
  const errors = bad.errors ?? [];
  for (const path of ["/image", "/backend", "/secretEnv"]) {
    assert.ok(errors.some((e) => e.startsWith(`${path}: `)), `${path} in ${JSON.stringify(errors)}`);
  }
  const elsewhere = await h.validateConfig({ driverKey: DRIVER_KEY, config: { ...config, namespace: "kube-system" } });
  assert.ok((elsewhere.errors ?? []).some((e) => e.startsWith("/namespace: ") && e.includes("does not allow namespace")), JSON.stringify(elsewhere));

  const good = await h.validateConfig({ driverKey: DRIVER_KEY, config });
  assert.equal(good.ok, true, JSON.stringify(good));
  assert.equal(good.normalizedConfig?.leaseTtlSeconds, 3600, "the provider's defaults are filled in");
  assert.equal(good.normalizedConfig?.timeoutMs, 60_000, "Paperclip's own keys are kept");
  assert.equal(good.normalizedConfig?.kubeconfig, cluster.kubeconfig, "the secret reference is kept as it came");

  const probe = await h.probe(base("env-probe"));
  assert.equal(probe.ok, true, JSON.stringify(probe));
  assert.ok((probe.diagnostics ?? []).every((d) => ["info", "warning", "error"].includes(d.severity) && d.code));
  assert.ok(!(probe.diagnostics ?? []).some((d) => d.code === "unsigned-ownership"), `the host has the operator's key: ${JSON.stringify(probe)}`);
});

test("a lease lives its whole life; a retried acquire adopts; a fresh one after the end is new", async () => {
  const acquire = { ...base("env-life"), runId: "run-1", agentId: "agent-1" };
  const lease = await h.acquireLease(acquire);
  assert.match(lease.providerLeaseId ?? "", /^k8s:job:default:/);
  assert.ok(lease.expiresAt && Date.parse(lease.expiresAt) > Date.now(), JSON.stringify(lease));
  assert.ok(!JSON.stringify(lease).includes(SECRET), "no secret value in the lease");

  const retried = await h.acquireLease(acquire);
  assert.equal(retried.providerLeaseId, lease.providerLeaseId, "a retried acquire adopts");
  const uid = (l: typeof lease) => (l.metadata?.kubernetesSandbox as { lease: Record<string, unknown> }).lease["workload-uid"];
  assert.equal(uid(retried), uid(lease), "the same sandbox");

  const resumed = await h.resumeLease({ ...base("env-life"), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  assert.equal(resumed.providerLeaseId, lease.providerLeaseId);
  await h.releaseLease({ ...base("env-life"), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  assertLeaseLifecycle(h.environmentEvents, "env-life");

  // Released (not reusable): the sandbox is gone, which the SDK is told as "cannot resume".
  const gone = await h.resumeLease({ ...base("env-life"), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  assert.equal(gone.providerLeaseId, null, JSON.stringify(gone));
  assert.equal(gone.metadata?.expired, true);

  const fresh = await h.acquireLease(acquire);
  assert.notEqual(fresh.providerLeaseId, lease.providerLeaseId, "a new sandbox, never the dead one");
  const stored = fresh.metadata?.kubernetesSandbox as { acquisition: { key: string; generation: number } };
  assert.equal(
    h.getState({ scopeKind: "company", scopeId: "company-1", namespace: "acquisition-generations", stateKey: stored.acquisition.key }),
    1,
    "the generation is in Paperclip's state, where a restarted worker finds it",
  );
  await h.destroyLease({ ...base("env-life"), providerLeaseId: fresh.providerLeaseId, leaseMetadata: fresh.metadata });
  await h.destroyLease({ ...base("env-life"), providerLeaseId: fresh.providerLeaseId, leaseMetadata: fresh.metadata });
});

test("a lease past its expiry cannot resume, and the run's next acquire gets a new sandbox", async () => {
  const acquire = { ...base("env-expired"), runId: "run-x", requestedExpiresAt: new Date(Date.now() + 2_000).toISOString() };
  const lease = await h.acquireLease(acquire);
  await new Promise((r) => setTimeout(r, 2_500));
  const expired = await h.resumeLease({ ...base("env-expired"), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  assert.deepEqual([expired.providerLeaseId, expired.metadata?.expired], [null, true], JSON.stringify(expired));
  // Paperclip destroys the stale lease, then acquires anew for the same run.
  await h.destroyLease({ ...base("env-expired"), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  const fresh = await h.acquireLease({ ...acquire, requestedExpiresAt: undefined });
  assert.notEqual(fresh.providerLeaseId, lease.providerLeaseId);
  assert.ok(fresh.expiresAt && Date.parse(fresh.expiresAt) > Date.now() + 60_000, "a live sandbox");
  await h.destroyLease({ ...base("env-expired"), providerLeaseId: fresh.providerLeaseId, leaseMetadata: fresh.metadata });
});

test("with reuseLease a released Sandbox is suspended and resumed for the next run", async () => {
  const reuse = { ...config, backend: "sandbox", sandbox: { workspaceVolume: { size: "1Gi" } }, reuseLease: true };
  const params = { driverKey: DRIVER_KEY, companyId: "company-1", environmentId: "env-reuse", config: reuse };
  // Without an execution workspace Paperclip could never resume it: ephemeral, deleted at release.
  const loose = await h.acquireLease({ ...params, runId: "run-loose", agentId: "agent-1" });
  assert.equal((loose.metadata?.kubernetesSandbox as { lease: Record<string, unknown> }).lease.reusable, false, JSON.stringify(loose));
  await h.releaseLease({ ...params, providerLeaseId: loose.providerLeaseId, leaseMetadata: loose.metadata });
  const gone = await h.resumeLease({ ...params, providerLeaseId: loose.providerLeaseId!, leaseMetadata: loose.metadata });
  assert.equal(gone.providerLeaseId, null, "released means deleted");

  const lease = await h.acquireLease({ ...params, runId: "run-r", agentId: "agent-1", executionWorkspaceId: "workspace-1" });
  assert.match(lease.providerLeaseId ?? "", /^k8s:sandbox:default:/);
  assert.equal((lease.metadata?.kubernetesSandbox as { lease: Record<string, unknown> }).lease.reusable, true);
  await h.releaseLease({ ...params, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  const resumed = await h.resumeLease({ ...params, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  assert.equal(resumed.providerLeaseId, lease.providerLeaseId, JSON.stringify(resumed));
  const pod = (l: typeof lease) => (l.metadata?.kubernetesSandbox as { lease: Record<string, unknown> }).lease["pod-uid"];
  assert.ok(pod(resumed) && pod(resumed) !== pod(lease), "the resumed Sandbox runs a new pod");
  await h.destroyLease({ ...params, providerLeaseId: resumed.providerLeaseId, leaseMetadata: resumed.metadata });
});

test("destroy works from the provider lease id alone, and a null id is a no-op", async () => {
  const lease = await h.acquireLease({ ...base("env-bare"), runId: "run-bare" });
  await h.destroyLease({ ...base("env-bare"), providerLeaseId: lease.providerLeaseId, leaseMetadata: { unrelated: true } });
  const gone = await h.resumeLease({ ...base("env-bare"), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  assert.equal(gone.providerLeaseId, null);
  await h.destroyLease({ ...base("env-bare"), providerLeaseId: null });
  await h.releaseLease({ ...base("env-bare"), providerLeaseId: null });
});

test("requestedExpiresAt bounds the lease's expiry", async () => {
  const requested = new Date(Date.now() + 10 * 60_000).toISOString();
  const lease = await h.acquireLease({ ...base("env-expiry"), runId: "run-e", requestedExpiresAt: requested });
  assert.ok(lease.expiresAt && Date.parse(lease.expiresAt) <= Date.parse(requested), `${lease.expiresAt} <= ${requested}`);
  await h.destroyLease({ ...base("env-expiry"), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  await assert.rejects(
    h.acquireLease({ ...base("env-expiry"), runId: "run-f", requestedExpiresAt: "next tuesday" }),
    /requestedExpiresAt is not an ISO 8601 time/,
  );
});

test("a killed sandbox-host serve is restarted without losing a lease", async () => {
  const lease = await h.acquireLease({ ...base("env-kill"), runId: "run-k" });
  const [before] = await serveProcesses();
  assert.ok(before?.pid, "a serve process runs");
  process.kill(before.pid, "SIGKILL");
  const resumed = await h.resumeLease({ ...base("env-kill"), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
  assert.equal(resumed.providerLeaseId, lease.providerLeaseId, "the lease survived the host");
  const [after] = await serveProcesses();
  assert.ok(after.pid && after.pid !== before.pid && after.starts === before.starts + 1, JSON.stringify({ before, after }));

  // Killed while an acquire is in flight (its Job create held for 1.5 s): the call goes to the
  // next process and completes, with one Job for the acquisition, never two.
  await cluster.fault(["--verb", "create", "--resource", "jobs", "--delay-ms", "1500", "--times", "1"]);
  let settled = false;
  const inFlight = h.acquireLease({ ...base("env-kill"), runId: "run-k2" }).finally(() => (settled = true));
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(settled, false, "the acquire is still in flight");
  process.kill(after.pid, "SIGKILL");
  const adopted = await inFlight;
  assert.match(adopted.providerLeaseId ?? "", /^k8s:job:default:/);
  // Sent again to the next process, the acquire made or adopted one Job, never two.
  const name = adopted.providerLeaseId!.split(":")[3]!;
  const jobs = (await cluster.kubectl(["get", "jobs", "-n", "default", "-o", "name"])).split("\n").filter((j) => j.startsWith(`job.batch/${name.slice(0, 27)}`));
  assert.deepEqual(jobs, [`job.batch/${name}`]);
  for (const l of [lease, adopted]) {
    await h.destroyLease({ ...base("env-kill"), providerLeaseId: l.providerLeaseId, leaseMetadata: l.metadata });
  }
});
