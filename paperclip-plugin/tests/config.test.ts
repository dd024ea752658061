// What an environment config may be, as Paperclip hands it over: validation with no company
// and unresolved secret references, run time with both; the kubeconfig and `secretEnv` as
// Paperclip secret references; unknown keys refused the same at validation and at acquire; a
// wrong kubeconfig refused at its field after one try; `archiveOnRelease` refused.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import type { EnvironmentTestHarness } from "@paperclipai/plugin-sdk/testing";

import { DRIVER_KEY } from "../src/manifest.js";
import plugin from "../src/plugin.js";
import { Cluster, harness, instanceConfig, serveProcesses } from "./support.js";

const SECRET_ID = "3f2b8a54-1c7e-4d2a-9b6f-0e5d4c3b2a19";
let cluster: Cluster;
let cache: string;
let h: EnvironmentTestHarness;
let config: Record<string, unknown>;

before(async () => {
  cluster = await Cluster.start();
  cache = mkdtempSync(join(tmpdir(), "paperclip-plugin-config-"));
  h = await harness(instanceConfig(cache));
  config = { namespace: "default", image: "busybox:1.36", backend: "job", kubeconfig: cluster.kubeconfig };
});

after(async () => {
  await plugin.definition.onShutdown?.();
  await cluster.stop();
  rmSync(cache, { recursive: true, force: true });
});

const validate = (c: Record<string, unknown>) => h.validateConfig({ driverKey: DRIVER_KEY, config: c });
const base = (environmentId: string, c: Record<string, unknown>) => ({ driverKey: DRIVER_KEY, companyId: "company-1", environmentId, config: c });

test("a kubeconfig that is a Paperclip secret's id validates; at run time an unresolved one is refused at its field", async () => {
  const v = await validate({ ...config, kubeconfig: SECRET_ID });
  assert.equal(v.ok, true, JSON.stringify(v));
  assert.equal(v.normalizedConfig?.kubeconfig, SECRET_ID, "the reference is stored as it came");
  await assert.rejects(h.acquireLease({ ...base("env-ref", { ...config, kubeconfig: SECRET_ID }), runId: "run-ref" }), (e: Error) => /^invalid-config at \/kubeconfig: is the id of a Paperclip secret/.test(e.message) || assert.fail(e.message));
});

test("secretEnv is stored as secret-reference slots, and the sandbox gets the values Paperclip resolved", async () => {
  const v = await validate({ ...config, secretEnv: { TOKEN: "inline-value", REF: SECRET_ID } });
  assert.equal(v.ok, true, JSON.stringify(v));
  assert.deepEqual(v.normalizedConfig?.secretEnv, { "1": { name: "TOKEN", value: "inline-value" }, "2": { name: "REF", value: SECRET_ID } });
  const again = await validate({ ...config, secretEnv: v.normalizedConfig?.secretEnv as Record<string, unknown> });
  assert.deepEqual(again.normalizedConfig?.secretEnv, v.normalizedConfig?.secretEnv, "the stored form validates to itself");

  const bad = await validate({ ...config, secretEnv: { "1": { name: "9x", value: "s3cr3t-value" }, "2": { name: "OK", value: "" } } });
  assert.equal(bad.ok, false);
  assert.deepEqual(bad.errors?.slice(0, 2), [
    "/secretEnv/1: slot 1: the name must be an environment variable name (letters, digits, _; not a digit first)",
    "/secretEnv/2: slot 2: the value must be a secret (a Paperclip secret, or the value to store as one)",
  ]);
  assert.ok(!JSON.stringify(bad).includes("s3cr3t-value") && !JSON.stringify(bad).includes("9x"), "no name or value is quoted");

  // At run time the slots hold resolved values; an id in the old map form was never resolved.
  const slots = { "1": { name: "TOKEN", value: "resolved-value" } };
  const lease = await h.acquireLease({ ...base("env-slots", { ...config, secretEnv: slots }), runId: "run-slots" });
  const out = await h.execute({ ...base("env-slots", { ...config, secretEnv: slots }), lease, command: "sh", args: ["-c", "test \"$TOKEN\" = resolved-value && echo same"] });
  assert.equal(out.stdout, "same\n", JSON.stringify(out));
  await h.destroyLease({ ...base("env-slots", config), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  await assert.rejects(h.acquireLease({ ...base("env-map", { ...config, secretEnv: { REF: SECRET_ID } }), runId: "run-map" }), (e: Error) => /^invalid-config at \/secretEnv: entry 1: holds the id of a Paperclip secret that was never resolved/.test(e.message) || assert.fail(e.message));
});

test("an unknown key is refused at validation and at acquire alike, naming the key it resembles", async () => {
  const v = await validate({ ...config, imagee: "busybox:1.36" });
  assert.equal(v.ok, false);
  assert.equal(v.errors?.[0], "/imagee: is not a key of this provider's config (did you mean image?)");
  await assert.rejects(h.acquireLease({ ...base("env-unknown", { ...config, imagee: "busybox:1.36" }), runId: "run-unknown" }), (e: Error) => /^invalid-config at \/imagee: is not a key of this provider's config \(did you mean image\?\)/.test(e.message) || assert.fail(e.message));
  const nested = await validate({ ...config, job: { backofLimit: 1 } });
  assert.equal(nested.errors?.[0], "/job/backofLimit: is not a key of this provider's config (did you mean backoffLimit?)");
  const ours = await validate({ ...config, timeoutMs: 60_000, reuseLease: false, streamRunLogs: true });
  assert.equal(ours.ok, true, `Paperclip's own keys are not the provider's and pass: ${JSON.stringify(ours)}`);
});

test("a kubeconfig that is not one is invalid-config at /kubeconfig after one start of sandbox-host", async () => {
  const garbage = "this is not yaml: [";
  const before = (await serveProcesses(true)).reduce((n, p) => n + p.starts, 0);
  const v = await validate({ ...config, kubeconfig: garbage });
  assert.equal(v.ok, false);
  assert.match(v.errors?.[0] ?? "", /^\/kubeconfig: the kubeconfig is not a kubeconfig/);
  const probe = await h.probe(base("env-garbage", { ...config, kubeconfig: garbage }));
  assert.equal(probe.ok, false);
  assert.equal(probe.diagnostics?.[0]?.code, "invalid-config", JSON.stringify(probe));
  await assert.rejects(h.acquireLease({ ...base("env-garbage", { ...config, kubeconfig: garbage }), runId: "run-g" }), (e: Error) => /^invalid-config at \/kubeconfig: the kubeconfig is not a kubeconfig/.test(e.message) || assert.fail(e.message));
  const after = (await serveProcesses(true)).reduce((n, p) => n + p.starts, 0);
  assert.equal(after - before, 3, "one start per call (validation, probe, acquire), never a restart");
});

test("archiveOnRelease is refused in a stored config, with the reason", async () => {
  const v = await validate({ ...config, archiveOnRelease: true });
  assert.equal(v.ok, false);
  assert.match(v.errors?.[0] ?? "", /^\/archiveOnRelease: is not supported: a Kubernetes sandbox is deleted at release/);
});
