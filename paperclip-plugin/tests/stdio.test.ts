// The built worker as the Paperclip server runs it: `node dist/src/worker.js`, JSON-RPC 2.0 on
// stdio, one message per line. The test plays the server: initialize, the environment calls
// of a lease's life (a command run in it among them), the worker's own requests (config.get)
// answered, then shutdown.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { DRIVER_KEY } from "../src/manifest.js";
import { PaperclipServer } from "./paperclip-server.js";
import { Cluster, instanceConfig } from "./support.js";

let cluster: Cluster;
let cache: string;
let server: PaperclipServer | undefined;

before(async () => {
  cluster = await Cluster.start();
  cache = mkdtempSync(join(tmpdir(), "paperclip-plugin-cache-"));
});

after(async () => {
  server?.kill();
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
});

test("the worker speaks Paperclip's JSON-RPC on stdio and runs a lease's life", async () => {
  server = new PaperclipServer(instanceConfig(cache));
  const methods = await server.initialize();
  for (const m of ["environmentValidateConfig", "environmentProbe", "environmentAcquireLease", "environmentResumeLease", "environmentReleaseLease", "environmentDestroyLease", "environmentExecute", "environmentRealizeWorkspace"]) {
    assert.ok(methods.includes(m), `${m} in ${JSON.stringify(methods)}`);
  }

  const workingDir = join(cache, "workspace");
  const config = { namespace: "default", image: "busybox:1.36", backend: "job", kubeconfig: cluster.kubeconfig, workingDir };
  const base = { driverKey: DRIVER_KEY, companyId: "company-1", environmentId: "env-stdio", config };
  // Validation comes with no company, and the server refuses `config.get` then.
  const validation = await server.call("environmentValidateConfig", { driverKey: DRIVER_KEY, config });
  assert.equal(validation.result?.ok, true, JSON.stringify(validation));

  // Two acquires at once: the worker and serve take them concurrently.
  const [a, b] = await Promise.all([
    server.call("environmentAcquireLease", { ...base, runId: "run-a" }),
    server.call("environmentAcquireLease", { ...base, runId: "run-b" }),
  ]);
  for (const acquired of [a, b]) assert.match(acquired.result?.providerLeaseId ?? "", /^k8s:job:default:/, JSON.stringify(acquired));
  assert.notEqual(a.result.providerLeaseId, b.result.providerLeaseId);

  // After every acquire Paperclip realizes the workspace: the directory exists in the sandbox.
  const realized = await server.call("environmentRealizeWorkspace", {
    ...base,
    lease: a.result,
    workspace: { remotePath: a.result.metadata.remoteCwd, localPath: "/nowhere" },
  });
  assert.equal(realized.result?.cwd, workingDir, JSON.stringify(realized));
  assert.ok(existsSync(workingDir), "the embedded kubelet runs commands on this machine: the directory is here");

  const executed = await server.call("environmentExecute", {
    ...base,
    lease: a.result,
    command: "sh",
    args: ["-c", "read line; echo \"got $line\"; echo done >&2; exit 4"],
    stdin: "it\n",
    timeoutMs: 20_000,
  });
  assert.deepEqual(
    executed.result && [executed.result.exitCode, executed.result.timedOut, executed.result.stdout, executed.result.stderr],
    [4, false, "got it\n", "done\n"],
    JSON.stringify(executed),
  );

  const resumed = await server.call("environmentResumeLease", { ...base, providerLeaseId: a.result.providerLeaseId, leaseMetadata: a.result.metadata });
  assert.equal(resumed.result?.providerLeaseId, a.result.providerLeaseId, JSON.stringify(resumed));
  for (const lease of [a.result, b.result]) {
    const destroyed = await server.call("environmentDestroyLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    assert.deepEqual(destroyed, { jsonrpc: "2.0", id: destroyed.id, result: null });
  }
  const gone = await server.call("environmentResumeLease", { ...base, providerLeaseId: a.result.providerLeaseId, leaseMetadata: a.result.metadata });
  assert.equal(gone.result?.providerLeaseId, null, JSON.stringify(gone));

  // A provider error reaches the server as a JSON-RPC error with the provider's words.
  const refused = await server.call("environmentAcquireLease", { ...base, config: { ...config, image: "" }, runId: "run-c" });
  assert.equal(refused.error?.code, -32002, JSON.stringify(refused));
  assert.match(refused.error?.message ?? "", /^invalid-config at \/image/);
  assert.ok(server.asked.every((m) => ["config.get", "state.get", "state.set", "metrics.write"].includes(m)), JSON.stringify(server.asked));
  assert.ok(
    server.metrics.some((m) => m.name === "sandbox.command.duration_ms" && m.tags?.providerLeaseId === a.result.providerLeaseId && m.value >= 0),
    `each command's duration is a metric, tagged with its lease: ${JSON.stringify(server.metrics)}`,
  );
  assert.ok(!JSON.stringify(server.metrics).includes("got it"), "no command output in a metric");
  assert.ok(server.asked.includes("state.set"), "a destroyed lease's acquisition is retired in Paperclip's state");

  const health = await server.call("health", {});
  assert.equal(health.result?.status, "ok", JSON.stringify(health));
  assert.equal((await server.call("shutdown", {})).result, null);
  assert.equal(await server.exited, 0, "the worker exits cleanly after shutdown");
});
