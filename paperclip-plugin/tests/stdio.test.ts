// The built worker as the Paperclip server runs it: `node dist/src/worker.js`, JSON-RPC 2.0 on
// stdio, one message per line. The test plays the server: initialize, the environment calls
// of a lease's life, the worker's own requests (config.get) answered, then shutdown.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import manifest, { DRIVER_KEY } from "../src/manifest.js";
import { Cluster, instanceConfig } from "./support.js";

const WORKER = join(dirname(fileURLToPath(import.meta.url)), "..", "src", "worker.js");

let cluster: Cluster;
let cache: string;

before(async () => {
  cluster = await Cluster.start();
  cache = mkdtempSync(join(tmpdir(), "paperclip-plugin-cache-"));
});

after(async () => {
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
});

type Message = { jsonrpc: "2.0"; id?: number | string | null; method?: string; params?: any; result?: any; error?: any };

test("the worker speaks Paperclip's JSON-RPC on stdio and runs a lease's life", async () => {
  const worker = spawn(process.execPath, [WORKER], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise<number | null>((r) => worker.once("exit", (code) => r(code)));
  const waiting = new Map<number | string, (m: Message) => void>();
  const notifications: Message[] = [];
  const instance = instanceConfig(cache);
  const send = (m: Message) => worker.stdin.write(`${JSON.stringify(m)}\n`);
  createInterface({ input: worker.stdout }).on("line", (line) => {
    const m = JSON.parse(line) as Message;
    if (m.method && m.id !== undefined && m.id !== null) {
      // The worker asks the server: its instance config is all it needs.
      assert.equal(m.method, "config.get", line);
      send({ jsonrpc: "2.0", id: m.id, result: instance });
    } else if (m.method) {
      notifications.push(m);
    } else {
      waiting.get(m.id as number)?.(m);
    }
  });
  let next = 1;
  const call = (method: string, params: unknown) =>
    new Promise<Message>((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      send({ jsonrpc: "2.0", id, method, params });
    });

  const init = await call("initialize", {
    manifest,
    config: instance,
    instanceInfo: { instanceId: "00000000-0000-0000-0000-000000000001", hostVersion: "2026.824.1" },
    apiVersion: 1,
  });
  const methods: string[] = init.result?.supportedMethods ?? [];
  for (const m of ["environmentValidateConfig", "environmentProbe", "environmentAcquireLease", "environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease"]) {
    assert.ok(methods.includes(m), `${m} in ${JSON.stringify(init)}`);
  }

  const config = { namespace: "default", image: "busybox:1.36", backend: "job", kubeconfig: cluster.kubeconfig };
  const base = { driverKey: DRIVER_KEY, companyId: "company-1", environmentId: "env-stdio", config };
  const validation = await call("environmentValidateConfig", { driverKey: DRIVER_KEY, config });
  assert.equal(validation.result?.ok, true, JSON.stringify(validation));

  // Two acquires at once: the worker and serve take them concurrently.
  const [a, b] = await Promise.all([
    call("environmentAcquireLease", { ...base, runId: "run-a" }),
    call("environmentAcquireLease", { ...base, runId: "run-b" }),
  ]);
  for (const acquired of [a, b]) assert.match(acquired.result?.providerLeaseId ?? "", /^k8s:job:default:/, JSON.stringify(acquired));
  assert.notEqual(a.result.providerLeaseId, b.result.providerLeaseId);

  const resumed = await call("environmentResumeLease", { ...base, providerLeaseId: a.result.providerLeaseId, leaseMetadata: a.result.metadata });
  assert.equal(resumed.result?.providerLeaseId, a.result.providerLeaseId, JSON.stringify(resumed));
  for (const lease of [a.result, b.result]) {
    const destroyed = await call("environmentDestroyLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    assert.deepEqual(destroyed, { jsonrpc: "2.0", id: destroyed.id, result: null });
  }
  const gone = await call("environmentResumeLease", { ...base, providerLeaseId: a.result.providerLeaseId, leaseMetadata: a.result.metadata });
  assert.equal(gone.result?.providerLeaseId, null, JSON.stringify(gone));

  // A provider error reaches the server as a JSON-RPC error with the provider's words.
  const refused = await call("environmentAcquireLease", { ...base, config: { ...config, image: "" }, runId: "run-c" });
  assert.equal(refused.error?.code, -32002, JSON.stringify(refused));
  assert.match(refused.error?.message ?? "", /^invalid-config at \/image/);

  const health = await call("health", {});
  assert.equal(health.result?.status, "ok", JSON.stringify(health));
  assert.equal((await call("shutdown", {})).result, null);
  assert.equal(await exited, 0, "the worker exits cleanly after shutdown");
});
