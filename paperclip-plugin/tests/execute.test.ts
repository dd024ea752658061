// Commands in a sandbox through environmentExecute, in the SDK's environment harness against
// the embedded cluster (whose simulated kubelet runs an exec as a local process): an execute
// within a lease's life (assertExecutionLifecycle), the lease's secret env present but
// redacted from output, exit codes and stderr, stdin, a timeout, the plugin's own env, output
// cut at the provider's cap, and a lease without a provider id refused.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { assertExecutionLifecycle, type EnvironmentTestHarness } from "@paperclipai/plugin-sdk/testing";
import type { PluginEnvironmentExecuteParams, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";

import { DRIVER_KEY } from "../src/manifest.js";
import { TRUNCATED_NOTE } from "../src/mapping.js";
import plugin from "../src/plugin.js";
import { Cluster, harness, instanceConfig } from "./support.js";

const SECRET = "pc-exec-secret-77";
const ENVIRONMENT = "env-exec";
let cluster: Cluster;
let cache: string;
let h: EnvironmentTestHarness;
let config: Record<string, unknown>;
/** The lease the command tests share, acquired once. */
let lease: PluginEnvironmentLease;

const base = (environmentId: string) => ({ driverKey: DRIVER_KEY, companyId: "company-1", environmentId, config });

/** One command on the shared lease. */
const run = (command: string, args: string[], extra: Partial<PluginEnvironmentExecuteParams> = {}) =>
  h.execute({ ...base(ENVIRONMENT), lease, command, args, ...extra });

before(async () => {
  cluster = await Cluster.start();
  cache = mkdtempSync(join(tmpdir(), "paperclip-plugin-cache-"));
  h = await harness(instanceConfig(cache));
  config = {
    namespace: "default",
    image: "busybox:1.36",
    backend: "job",
    kubeconfig: cluster.kubeconfig,
    secretEnv: { TOKEN: SECRET },
    timeoutMs: 60_000,
  };
  lease = await h.acquireLease({ ...base(ENVIRONMENT), runId: "run-exec" });
});

after(async () => {
  if (lease) await h.destroyLease({ ...base(ENVIRONMENT), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  await plugin.definition.onShutdown?.();
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
});

test("a command runs within a lease's life", async () => {
  const own = await h.acquireLease({ ...base("env-exec-life"), runId: "run-life" });
  const result = await h.execute({ ...base("env-exec-life"), lease: own, command: "sh", args: ["-c", "echo hi"] });
  assert.deepEqual(
    [result.exitCode, result.signal, result.timedOut, result.stdout, result.stderr],
    [0, null, false, "hi\n", ""],
    JSON.stringify(result),
  );
  await h.releaseLease({ ...base("env-exec-life"), providerLeaseId: own.providerLeaseId, leaseMetadata: own.metadata });
  const [execute] = assertExecutionLifecycle(h.environmentEvents, "env-exec-life");
  assert.equal(execute?.error, undefined);
});

test("the lease's secret env reaches the command, and its value never comes back in output", async () => {
  const counted = await run("sh", ["-c", "echo $TOKEN | wc -c"]);
  assert.equal(counted.exitCode, 0, JSON.stringify(counted));
  assert.equal(counted.stdout.trim(), String(Buffer.byteLength(SECRET) + 1), "the value, and a newline");

  const shown = await run("sh", ["-c", "echo $TOKEN; echo $TOKEN >&2"]);
  assert.equal(shown.exitCode, 0, JSON.stringify(shown));
  assert.ok(shown.stdout.includes("[redacted]") && shown.stderr.includes("[redacted]"), JSON.stringify(shown));
  assert.ok(!JSON.stringify(shown).includes(SECRET), "no secret value in the result");
});

test("a failing command's exit code and stderr are reported", async () => {
  const failed = await run("sh", ["-c", "echo to-stdout; echo oops >&2; exit 3"]);
  assert.deepEqual(
    [failed.exitCode, failed.timedOut, failed.stdout, failed.stderr],
    [3, false, "to-stdout\n", "oops\n"],
    JSON.stringify(failed),
  );
});

test("stdin reaches the command, and the call's env is set", async () => {
  const input = "line one\nline two\n";
  const echoed = await run("cat", [], { stdin: input });
  assert.deepEqual([echoed.exitCode, echoed.stdout], [0, input], JSON.stringify(echoed));

  const greeted = await run("sh", ["-c", 'printf "%s" "$GREETING"'], { env: { GREETING: "hello there" } });
  assert.deepEqual([greeted.exitCode, greeted.stdout], [0, "hello there"], JSON.stringify(greeted));
});

test("a command past its timeout is stopped and reported as timed out, and the sandbox goes on", async () => {
  const started = Date.now();
  const slow = await run("sleep", ["30"], { timeoutMs: 1_000 });
  const took = Date.now() - started;
  assert.equal(slow.timedOut, true, JSON.stringify(slow));
  assert.notEqual(slow.exitCode, 0, JSON.stringify(slow));
  assert.ok(took < 15_000, `timed out after ${took} ms, not at once`);

  const next = await run("sh", ["-c", "echo still here"]);
  assert.deepEqual([next.exitCode, next.stdout], [0, "still here\n"], JSON.stringify(next));
});

test("output past the provider's cap is cut and says so", async () => {
  const big = await run("sh", ["-c", "yes | head -c 3000000"]);
  assert.equal(big.exitCode, 0, JSON.stringify({ ...big, stdout: big.stdout.slice(0, 80) }));
  assert.ok(big.stdout.endsWith(TRUNCATED_NOTE), big.stdout.slice(-80));
  assert.ok(big.stdout.length < 3_000_000, `${big.stdout.length} characters`);
  assert.deepEqual(big.metadata, { stdoutTruncated: true, stderrTruncated: false });
});

test("an execute on a lease without a provider lease id is refused", async () => {
  await assert.rejects(
    h.execute({ ...base("env-exec-none"), lease: { providerLeaseId: null }, command: "true" }),
    /invalid-params: the lease has no providerLeaseId/,
  );
  await assert.rejects(
    h.execute({ ...base("env-exec-none"), lease, command: "sh", timeoutMs: -1 }),
    /invalid-params: timeoutMs must be a number of milliseconds/,
  );
});

test("commands beyond what sandbox-host queues for one lease are sent again, never failed busy", async () => {
  // One call at a time: sandbox-host takes 8 commands of a lease and answers the rest `busy`.
  const limits = join(cache, "narrow-limits.json");
  writeFileSync(limits, JSON.stringify({ "max-concurrent-calls": 1 }));
  const narrow = await harness({ ...instanceConfig(cache), limitsFile: limits });
  const count = 12;
  const results = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      narrow.execute({ ...base(ENVIRONMENT), lease, command: "sh", args: ["-c", `sleep 0.2; echo ${i}`] }),
    ),
  );
  results.forEach((r, i) => {
    assert.equal(r.exitCode, 0, JSON.stringify(r));
    assert.equal(r.stdout.trim(), String(i));
  });
});
