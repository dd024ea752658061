// `make demo-paperclip`: a Paperclip-shaped run, step by step: acquire, a command in the
// sandbox, release. A stand-in for the Paperclip server starts the built plugin worker and
// drives one run's environment calls over the worker's JSON-RPC on stdio, as the server does;
// the worker runs the provider component in a `sandbox-host serve` child against the embedded
// cluster (a `sandbox-dev cluster` process).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { DRIVER_KEY } from "../src/manifest.js";
import { PaperclipServer } from "../tests/paperclip-server.js";
import { Cluster } from "../tests/support.js";

const step = (what: string, value: unknown) => console.log(`\n== ${what}\n${JSON.stringify(value, null, 2)}`);

const cluster = await Cluster.start();
const cache = mkdtempSync(join(tmpdir(), "paperclip-demo-cache-"));
try {
  const server = new PaperclipServer({ allowedNamespaces: ["default"], cacheDir: cache });
  step("initialize: the worker's methods", await server.initialize());
  const config = { namespace: "default", image: "busybox:1.36", backend: "sandbox", kubeconfig: cluster.kubeconfig, secretEnv: { TOKEN: "demo-secret" } };
  const base = { driverKey: DRIVER_KEY, companyId: "company-1", environmentId: "env-demo", config };
  step("environmentValidateConfig", (await server.call("environmentValidateConfig", { driverKey: DRIVER_KEY, config })).result?.errors);
  step("environmentProbe", (await server.call("environmentProbe", base)).result);
  const started = Date.now();
  const lease = (await server.call("environmentAcquireLease", { ...base, runId: "run-demo", agentId: "agent-1" })).result;
  step(`environmentAcquireLease (${Date.now() - started} ms, ready)`, lease);
  const resumed = (await server.call("environmentResumeLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).result;
  step("environmentResumeLease", { providerLeaseId: resumed.providerLeaseId, expiresAt: resumed.expiresAt });
  // The sandbox's secret env is there for the command, and redacted from what it prints.
  const command = 'echo "hello from $HOSTNAME"; echo "TOKEN has ${#TOKEN} characters: $TOKEN"; echo "a line on stderr" >&2';
  const executed = await server.call("environmentExecute", { ...base, lease: resumed, command: "sh", args: ["-c", command], timeoutMs: 30_000 });
  if (executed.error) {
    step("environmentExecute failed", executed.error);
  } else {
    const { exitCode, timedOut, metadata, stdout, stderr } = executed.result;
    step(`environmentExecute: sh -c '${command}'`, { exitCode, timedOut, metadata });
    console.log(`-- stdout\n${stdout}-- stderr\n${stderr}`);
  }
  step("environmentReleaseLease", (await server.call("environmentReleaseLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).result);
  const gone = (await server.call("environmentResumeLease", { ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).result;
  step("environmentResumeLease after release: cannot resume", gone);
  await server.call("shutdown", {});
  console.log(`\nworker exited with code ${await server.exited}`);
} finally {
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
}
