// The plugin in the real Paperclip server: installed with Paperclip's own CLI, driven through
// Paperclip's HTTP API only, its sandboxes on the embedded cluster. One server and one cluster
// for the whole file; the tests run in order and build on each other (a later one says which
// earlier step it needs when that step failed).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, before, test, type TestContext } from "node:test";

import { type RunFigures, commandDurations, describeFigures, writeFigures } from "./figures.js";
import { LANE_DIR, PaperclipServer, REPO_ROOT, SERVER_DIR } from "./server.js";
import {
  Cluster,
  clusterObjects,
  dumpDatabase,
  findCanaries,
  leftovers,
  managedObjects,
  pluginDir,
  quantile,
  sandboxDevBinary,
  scratchDir,
  sha256,
  show,
  standInRecords,
  waitFor,
  writeStandInAgent,
} from "./support.js";

/** The plugin's environment driver key (Paperclip's own Kubernetes plugin has `kubernetes`). */
const DRIVER = process.env.PAPERCLIP_LANE_DRIVER_KEY ?? "kubernetes-wasm";
/** The plugin's id, as its manifest declares it. */
const PLUGIN_KEY = "sandbox-provider.kubernetes";
/** The image of the lane's sandboxes (the embedded cluster runs commands locally; any name). */
const IMAGE = "busybox:1.36";

const RUN_DEADLINE_MS = 600_000;

/** The same plugin packaged with the reference provider (leases only, no workload). */
const REFERENCE_PLUGIN_KEY = "sandbox-provider.reference";
const REFERENCE_DRIVER = "reference-wasm";
/** The warm pool the operator sets up and allows (claim backend), and one it does not allow. */
const POOL = "lane-pool";
const UNALLOWED_POOL = "lane-pool-not-allowed";

/** The reference plugin's package: PAPERCLIP_REFERENCE_PLUGIN_DIR (default: target/paperclip-plugin-reference). */
function referencePluginDir(): string {
  const dir = resolve(process.env.PAPERCLIP_REFERENCE_PLUGIN_DIR ?? join(REPO_ROOT, "target", "paperclip-plugin-reference"));
  if (!existsSync(join(dir, "package.json"))) {
    assert.fail(`no plugin package at ${dir} (PAPERCLIP_REFERENCE_PLUGIN_DIR): build it with make paperclip-plugin PLUGIN_PROVIDER=reference`);
  }
  return dir;
}

const laneStarted = Date.now();

/** The version of the Paperclip server the lane runs (its npm package's). */
function paperclipVersion(): string {
  try {
    return `paperclipai ${JSON.parse(readFileSync(join(SERVER_DIR, "node_modules", "paperclipai", "package.json"), "utf8")).version}`;
  } catch {
    return "paperclipai (version unknown)";
  }
}

const REF_CANARY = `ref-canary-${randomUUID()}`;
const INLINE_CANARY = `inline-canary-${randomUUID()}`;
/** The operator's ownership key: the host signs what it creates; never in Paperclip's records. */
const OWNERSHIP_KEY = `ownership-key-${randomUUID()}${randomUUID()}`;

let server: PaperclipServer;
let cluster: Cluster;
let scratch: string;
let ownershipKeyFile: string;
let standIn: string;
let standInOut: string;
/** The uids of what was on the cluster before any test ran (the leak audit's baseline). */
let baseline = new Set<string>();

const figures: RunFigures[] = [];
/** The texts the user sees (422s, probes, run failures), printed at the end. */
const recorded: Record<string, string> = {};

const state: {
  pluginId?: string;
  companyId?: string;
  kubeconfigSecretId?: string;
  refSecretId?: string;
  jobEnvId?: string;
  bindingEnvId?: string;
  secretEnvEnvId?: string;
  reuseEnvId?: string;
  referencePluginId?: string;
} = {};

/** Every environment the lane created, for the lease audit at the end. */
const environments: { id: string; name: string }[] = [];

function need<K extends keyof typeof state>(key: K, step: string): NonNullable<(typeof state)[K]> {
  const value = state[key];
  if (value === undefined || value === null) assert.fail(`needs ${String(key)}, which the step "${step}" sets up (it failed)`);
  return value as NonNullable<(typeof state)[K]>;
}

/** An environment config of our driver, kubeconfig a secret reference. */
function envConfig(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    provider: DRIVER,
    namespace: "default",
    backend: "job",
    image: IMAGE,
    kubeconfig: need("kubeconfigSecretId", "company, kubeconfig secret and plugin config"),
    ...extra,
  };
}

before(async () => {
  pluginDir(); // fails at once, naming how to build the package, when it is missing
  scratch = scratchDir();
  standInOut = join(scratch, "stand-in-records");
  standIn = writeStandInAgent(join(scratch, "bin"), standInOut, ["REF_TOKEN", "INLINE_TOKEN"]);
  ownershipKeyFile = join(scratch, "ownership-key");
  writeFileSync(ownershipKeyFile, `${OWNERSHIP_KEY}\n`, { mode: 0o600 });
  cluster = await Cluster.start(sandboxDevBinary());
  baseline = new Set((await clusterObjects(cluster)).map((o) => o.uid));
  server = await PaperclipServer.start();
});

after(async () => {
  const keep = process.env.PAPERCLIP_LANE_KEEP === "1";
  if (keep && server) console.error(`paperclip-lane: kept the server's data dir ${server.dataDir} (log: ${server.logPath})`);
  await server?.stop({ keepDataDir: keep });
  await cluster?.stop();
  if (scratch && !keep) rmSync(scratch, { recursive: true, force: true });
});

/** `paperclipai plugin install <dir> --local`, then waits for the plugin to be ready: its id. */
async function installPlugin(t: TestContext, dir: string, key: string): Promise<string> {
  const res = await server.cli(["plugin", "install", dir, "--local", "--json", ...server.cliClientOptions()]);
  t.diagnostic(`paperclipai plugin install ${key}: exit ${res.code}\n${res.stdout}\n${res.stderr}`);
  assert.equal(res.code, 0, `paperclipai plugin install ${dir} --local failed:\n${res.stdout}\n${res.stderr}\nserver:\n${server.tail()}`);
  const installed = JSON.parse(res.stdout.slice(res.stdout.indexOf("{"))) as { id: string; pluginKey: string; status: string; lastError?: string };
  assert.equal(installed.pluginKey, key);
  const ready = await waitFor(
    `plugin ${key} to be ready`,
    async () => {
      const got = await server.api("GET", `/plugins/${installed.id}`);
      if (got.json?.status === "error") throw new Error(`the plugin is in error: ${show(got)}`);
      return got.json?.status === "ready" ? got.json : undefined;
    },
    { deadlineMs: 180_000 },
  );
  t.diagnostic(`plugin ${ready.pluginKey} ${ready.version} ${ready.status}`);
  return installed.id;
}

test("the plugin installs with `paperclipai plugin install <dir> --local` and gets ready", async (t) => {
  state.pluginId = await installPlugin(t, pluginDir(), PLUGIN_KEY);
});

test("company, kubeconfig secret and plugin config", async (t) => {
  const pluginId = need("pluginId", "plugin install");
  const company = await server.api("POST", "/companies", { name: "Paperclip lane" });
  assert.equal(company.status, 201, show(company));
  state.companyId = company.json.id;
  const cid = company.json.id as string;

  const secret = await server.api("POST", `/companies/${cid}/secrets`, {
    name: "lane-kubeconfig",
    value: cluster.kubeconfig,
    description: "The embedded cluster's admin kubeconfig",
  });
  assert.equal(secret.status, 201, show(secret));
  assert.ok(!secret.text.includes(cluster.kubeconfig), "the secret's answer quotes its value");
  state.kubeconfigSecretId = secret.json.id;

  const ref = await server.api("POST", `/companies/${cid}/secrets`, { name: "lane-ref-token", value: REF_CANARY });
  assert.equal(ref.status, 201, show(ref));
  state.refSecretId = ref.json.id;

  const config = await server.api("POST", `/plugins/${pluginId}/config`, {
    companyId: cid,
    configJson: { allowedNamespaces: ["default"], allowedWarmPools: [POOL], ownershipKeyFile },
  });
  t.diagnostic(`POST /plugins/:id/config: ${show(config)}`);
  assert.equal(config.status, 200, show(config));

  const capabilities = await waitFor(
    `GET /companies/:id/environments/capabilities to list the sandbox provider ${DRIVER}`,
    async () => {
      const got = await server.api("GET", `/companies/${cid}/environments/capabilities`);
      return got.json?.sandboxProviders?.[DRIVER] ?? undefined;
    },
    { deadlineMs: 60_000 },
  );
  t.diagnostic(`capabilities of ${DRIVER}: ${JSON.stringify({ ...capabilities, configSchema: "..." })}`);
  assert.equal(capabilities.status, "supported");
  assert.equal(capabilities.supportsReusableLeases, true, "reusable leases are not offered (the worker lacks resume/release/destroy?)");
});

test("environment on backend job: create, draft probe, saved probe, PATCH", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  const secretId = need("kubeconfigSecretId", "company, kubeconfig secret and plugin config");

  const draft = await server.api("POST", `/companies/${cid}/environments/probe-config`, {
    name: "lane draft",
    driver: "sandbox",
    config: envConfig(),
  });
  t.diagnostic(`draft probe: ${show(draft)}`);
  assert.equal(draft.status, 200, show(draft));
  assert.equal(draft.json.ok, true, `the draft probe failed: ${show(draft)}`);
  // Paperclip passes the plugin's diagnostics on: the host has the operator's key, so none
  // says ownership is unsigned (the namespace's missing NetworkPolicy is still warned of).
  const codes = ((draft.json.details?.diagnostics ?? []) as { code?: string }[]).map((d) => d.code);
  assert.ok(codes.length > 0, `the draft probe's answer carries no diagnostics: ${show(draft)}`);
  assert.ok(!codes.includes("unsigned-ownership"), `the host runs without the operator's ownership key: ${codes}`);

  const created = await server.api("POST", `/companies/${cid}/environments`, {
    name: "lane job",
    driver: "sandbox",
    config: envConfig(),
  });
  assert.equal(created.status, 201, show(created));
  state.jobEnvId = created.json.id;
  environments.push({ id: created.json.id, name: created.json.name });
  assert.equal(created.json.config.kubeconfig, secretId, `the kubeconfig is not stored as the secret's id: ${show(created)}`);
  assert.ok(!created.text.includes("certificate-authority-data"), "the environment's answer holds the kubeconfig itself");

  const bound = await server.api("POST", `/companies/${cid}/environments`, {
    name: "lane job (secret binding)",
    driver: "sandbox",
    config: envConfig({ kubeconfig: { type: "secret_ref", secretId, version: "latest" } }),
  });
  assert.equal(bound.status, 201, show(bound));
  state.bindingEnvId = bound.json.id;
  environments.push({ id: bound.json.id, name: bound.json.name });
  assert.equal(bound.json.config.kubeconfig, secretId, `a {type: secret_ref} binding is not stored as the secret's id: ${show(bound)}`);

  const refs = await server.api("GET", `/environments/${created.json.id}/secret-refs`);
  t.diagnostic(`secret-refs: ${show(refs)}`);
  assert.equal(refs.status, 200, show(refs));
  assert.ok(refs.text.includes(secretId), `the environment's secret refs do not name the kubeconfig secret: ${show(refs)}`);

  for (const id of [created.json.id, bound.json.id]) {
    const probe = await server.api("POST", `/environments/${id}/probe?companyId=${cid}`, {});
    t.diagnostic(`saved probe of ${id}: ${show(probe)}`);
    assert.equal(probe.status, 200, show(probe));
    assert.equal(probe.json.ok, true, `the saved probe failed: ${show(probe)}`);
  }

  const patched = await server.api("PATCH", `/environments/${created.json.id}?companyId=${cid}`, { config: { leaseTtlSeconds: 900 } });
  t.diagnostic(`PATCH: ${show(patched)}`);
  assert.equal(patched.status, 200, show(patched));
  assert.equal(patched.json.config.leaseTtlSeconds, 900, show(patched));
  assert.equal(patched.json.config.kubeconfig, secretId, `PATCH lost the kubeconfig reference: ${show(patched)}`);
  const probe = await server.api("POST", `/environments/${created.json.id}/probe?companyId=${cid}`, {});
  assert.equal(probe.json?.ok, true, `the probe after PATCH failed: ${show(probe)}`);
});

test("bad configs: create answers 422 and the message names the field", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  const base = envConfig();
  const { namespace: _namespace, ...withoutNamespace } = base;
  const cases: { name: string; field: RegExp; config: Record<string, unknown> }[] = [
    { name: "namespace missing", field: /namespace/i, config: withoutNamespace },
    { name: "bad namespace", field: /namespace/i, config: { ...base, namespace: "Not_A_Namespace!" } },
    { name: "unknown key imagee", field: /imagee/, config: { ...base, imagee: "busybox" } },
    { name: "backend nope", field: /backend/i, config: { ...base, backend: "nope" } },
    { name: "kubeconfig garbage", field: /kubeconfig/i, config: { ...base, kubeconfig: "this is not a kubeconfig: [" } },
  ];
  const seen: string[] = [];
  const failures: string[] = [];
  for (const c of cases) {
    const res = await server.api("POST", `/companies/${cid}/environments`, { name: `lane bad: ${c.name}`, driver: "sandbox", config: c.config });
    const message = typeof res.json?.error === "string" ? res.json.error : res.text;
    seen.push(`${c.name}: HTTP ${res.status} ${JSON.stringify(message)}`);
    if (res.status !== 422) failures.push(`${c.name}: expected 422, got ${show(res)}`);
    else if (!c.field.test(message)) failures.push(`${c.name}: the message ${JSON.stringify(message)} does not name the field (${c.field})`);
  }
  t.diagnostic(`what the user sees:\n${seen.join("\n")}`);
  recorded["422 texts"] = seen.join("\n");
  assert.deepEqual(failures, []);
});

test("secretEnv: a secret id and an inline value are stored as Paperclip secrets", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  const refSecretId = need("refSecretId", "company, kubeconfig secret and plugin config");
  const created = await server.api("POST", `/companies/${cid}/environments`, {
    name: "lane secretEnv",
    driver: "sandbox",
    config: envConfig({ secretEnv: { REF_TOKEN: refSecretId, INLINE_TOKEN: INLINE_CANARY } }),
  });
  t.diagnostic(`create with secretEnv: ${show(created)}`);
  assert.equal(created.status, 201, show(created));
  state.secretEnvEnvId = created.json.id;
  environments.push({ id: created.json.id, name: created.json.name });
  assert.ok(!created.text.includes(INLINE_CANARY), `the environment's answer holds the inline value: ${show(created)}`);
  const read = await server.api("GET", `/environments/${created.json.id}`);
  assert.ok(!read.text.includes(INLINE_CANARY), `the stored environment holds the inline value: ${show(read)}`);
  const refs = await server.api("GET", `/environments/${created.json.id}/secret-refs`);
  t.diagnostic(`secret-refs: ${show(refs)}`);
  assert.ok(refs.text.includes(refSecretId), `the referenced secret is not one of the environment's secret refs: ${show(refs)}`);
  const probe = await server.api("POST", `/environments/${created.json.id}/probe?companyId=${cid}`, {});
  assert.equal(probe.json?.ok, true, `the saved probe failed: ${show(probe)}`);
});

/** Creates a `claude_local` agent (engine cli, the stand-in as its command) on an environment. */
async function createAgent(cid: string, name: string, environmentId: string): Promise<string> {
  const agent = await server.api("POST", `/companies/${cid}/agents`, {
    name,
    role: "general",
    adapterType: "claude_local",
    adapterConfig: { engine: "cli", command: standIn, timeoutSec: 300 },
    defaultEnvironmentId: environmentId,
  });
  assert.equal(agent.status, 201, show(agent));
  return agent.json.id as string;
}

interface RunOutcome {
  run: any;
  log: string;
  execs: number;
  /** The leases of the run (Paperclip's records). */
  leases: any[];
}

/** `POST /agents/:id/wakeup`: the run it started. */
async function wake(t: TestContext, agentId: string, extra: Record<string, unknown> = {}): Promise<string> {
  const woke = await server.api("POST", `/agents/${agentId}/wakeup`, { source: "on_demand", triggerDetail: "manual", reason: "paperclip lane", ...extra });
  t.diagnostic(`wakeup: HTTP ${woke.status} run ${woke.json?.id} ${woke.json?.status}`);
  assert.equal(woke.status, 202, show(woke));
  assert.ok(woke.json?.id, `the wakeup started no run: ${show(woke)}`);
  return woke.json.id as string;
}

/**
 * Waits for a run to end and gathers its log, the cluster's exec requests since `since` (a
 * mark of the request log taken before the run was started), and its leases; a successful
 * run's figures go to `figures` under `label`.
 */
async function finishRun(t: TestContext, label: string, runId: string, environmentId: string, since: number): Promise<RunOutcome> {
  let last = "";
  const run = await waitFor(
    `heartbeat run ${runId} (${label}) to finish`,
    async () => {
      const got = await server.api("GET", `/heartbeat-runs/${runId}`);
      last = `status ${got.json?.status}`;
      return ["queued", "scheduled_retry", "running"].includes(got.json?.status) ? undefined : got.json;
    },
    { deadlineMs: RUN_DEADLINE_MS, intervalMs: 1000, describe: () => last },
  );
  const logAnswer = await server.api("GET", `/heartbeat-runs/${runId}/log`);
  const log = typeof logAnswer.json?.content === "string" ? logAnswer.json.content : logAnswer.text;
  // The lease is released as the run ends; its row may be written a moment after the run's.
  let leases: any[] = [];
  await waitFor(
    `the lease of run ${runId} (${label}) to be released or failed`,
    async () => {
      const all = ((await server.api("GET", `/environments/${environmentId}/leases`)).json ?? []) as any[];
      leases = all.filter((l) => l.heartbeatRunId === runId);
      return leases.length === 0 || leases.every((l) => l.status !== "active") ? true : undefined;
    },
    { deadlineMs: 120_000, intervalMs: 500, describe: () => JSON.stringify(leases.map((l) => l.status)) },
  );
  // The run's events: when Paperclip handed the run to the adapter (the sandbox set up).
  const events = await server.api("GET", `/heartbeat-runs/${runId}/events`);
  const invoked = ((Array.isArray(events.json) ? events.json : []) as any[]).find((e) => e.eventType === "adapter.invoke")?.createdAt as string | undefined;
  const { entries } = await cluster.requestLog(since);
  const execEntries = entries.filter((e) => e.resource === "pods" && e.subresource === "exec");
  const lease = leases[0];
  const ms = (a: unknown, b: unknown) => (typeof a === "string" && typeof b === "string" ? Date.parse(b) - Date.parse(a) : null);
  t.diagnostic(
    [
      `run ${runId} (${label}): ${run.status}${run.error ? ` (${run.error})` : ""}${run.errorCode ? ` [${run.errorCode}]` : ""}`,
      `started ${run.startedAt} finished ${run.finishedAt}`,
      lease
        ? `lease ${lease.id} ${lease.leasePolicy} ${lease.status} (${lease.metadata?.sandboxLeaseAcquisition?.outcome ?? "?"}): provider lease ${lease.providerLeaseId}, execution workspace ${lease.executionWorkspaceId}, acquired ${lease.acquiredAt}, released ${lease.releasedAt}`
        : `no lease of this run`,
      `cluster: ${entries.length} requests, ${execEntries.length} exec`,
    ].join("\n"),
  );
  if (run.status === "succeeded") {
    const upgrades = execEntries.map((e) => e.latencyMicros / 1000);
    const round = (v: number | undefined | null) => (v === undefined || v === null ? null : Math.round(v * 10) / 10);
    figures.push({
      label,
      runId,
      provider: lease?.provider ?? "?",
      backend: lease?.metadata?.backend ?? "?",
      leaseOutcome: lease?.metadata?.sandboxLeaseAcquisition?.outcome ?? null,
      runStartToLeaseMs: lease ? ms(run.startedAt, lease.acquiredAt) : null,
      execs: execEntries.length,
      execUpgradeP50Ms: round(quantile(upgrades, 0.5)),
      execUpgradeP99Ms: round(quantile(upgrades, 0.99)),
      // Filled in at the end, from the plugin's logs (see the figures test).
      providerLeaseIds: leases.map((l) => l.providerLeaseId).filter((id): id is string => typeof id === "string"),
      startedAt: run.startedAt,
      finishedAt: run.finishedAt,
      executes: 0,
      executeP50Ms: null,
      executeP99Ms: null,
      // A reusable lease that a later run resumed is retired ("expired") at that resume:
      // its releasedAt is then the resume's, not this run's release.
      releaseAfterRunMs: lease && lease.status === "released" ? ms(run.finishedAt, lease.releasedAt) : null,
      runStartToAdapterMs: invoked ? ms(run.startedAt, invoked) : null,
      adapterToRunEndMs: invoked ? ms(invoked, run.finishedAt) : null,
      runMs: ms(run.startedAt, run.finishedAt),
    });
  } else {
    t.diagnostic(`run log:\n${log.slice(-8000)}`);
    t.diagnostic(`server log:\n${server.tail(80)}`);
  }
  return { run, log, execs: execEntries.length, leases };
}

/** Wakes the agent up on demand, waits for its run to end, and gathers its log, execs and leases. */
async function heartbeat(t: TestContext, label: string, agentId: string, environmentId: string): Promise<RunOutcome> {
  const since = await cluster.lastSeq();
  const runId = await wake(t, agentId);
  return await finishRun(t, label, runId, environmentId, since);
}

/** Creates an environment after its draft probe, then probes it saved; both probes must succeed. */
async function environmentRoundTrip(t: TestContext, cid: string, name: string, config: Record<string, unknown>): Promise<any> {
  const draft = await server.api("POST", `/companies/${cid}/environments/probe-config`, { name: `${name} (draft)`, driver: "sandbox", config });
  t.diagnostic(`draft probe of ${name}: ${show(draft)}`);
  assert.equal(draft.status, 200, show(draft));
  assert.equal(draft.json.ok, true, `the draft probe of ${name} failed: ${show(draft)}`);
  const created = await server.api("POST", `/companies/${cid}/environments`, { name, driver: "sandbox", config });
  assert.equal(created.status, 201, show(created));
  environments.push({ id: created.json.id, name });
  const probe = await server.api("POST", `/environments/${created.json.id}/probe?companyId=${cid}`, {});
  t.diagnostic(`saved probe of ${name}: ${show(probe)}`);
  assert.equal(probe.status, 200, show(probe));
  assert.equal(probe.json.ok, true, `the saved probe of ${name} failed: ${show(probe)}`);
  return created.json;
}

test("an agent run in a job sandbox succeeds and sees its secretEnv", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  const envId = need("secretEnvEnvId", "secretEnv");
  const agentId = await createAgent(cid, "Lane job agent", envId);
  const before = standInRecords(standInOut).length;
  const outcome = await heartbeat(t, "job, secretEnv", agentId, envId);
  assert.equal(outcome.run.status, "succeeded", `the run ended ${outcome.run.status}: ${outcome.run.error ?? ""}\n${outcome.log.slice(-4000)}`);
  assert.ok(outcome.execs > 0, "the cluster saw no exec for the run");
  assert.equal(outcome.leases.length, 1, `expected one lease for the run: ${JSON.stringify(outcome.leases)}`);
  assert.equal(outcome.leases[0].status, "released", `the run's lease is ${outcome.leases[0].status}`);
  const records = standInRecords(standInOut).slice(before);
  assert.ok(records.length >= 1, "the stand-in agent never ran in the sandbox");
  const seen = records[records.length - 1]!;
  t.diagnostic(`the stand-in ran in ${seen.cwd} with ${JSON.stringify(seen.argv)}`);
  assert.equal(seen.sha256.REF_TOKEN, sha256(REF_CANARY), "the sandbox did not get REF_TOKEN (the referenced secret's value)");
  assert.equal(seen.sha256.INLINE_TOKEN, sha256(INLINE_CANARY), "the sandbox did not get INLINE_TOKEN (the inline value)");
  assert.ok(!outcome.log.includes(REF_CANARY) && !outcome.log.includes(INLINE_CANARY), "the run log holds a secret value");
});

test("environments on backend sandbox (ephemeral) and claim (the operator's warm pool): probes and an agent run each", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  // The operator's warm pool (its template decides the pod); the company config allows it.
  const pool = await cluster.pool("default", POOL, ["create", "--replicas", "2", "--image", IMAGE, "--wait-seconds", "180"]);
  t.diagnostic(`sandbox-host pool create: ${pool.trim()}`);

  const sandboxEnv = await environmentRoundTrip(t, cid, "lane sandbox", envConfig({ backend: "sandbox" }));
  const { image: _image, ...noImage } = envConfig();
  const claimEnv = await environmentRoundTrip(t, cid, "lane claim", { ...noImage, backend: "claim", claim: { warmPool: POOL } });

  const failures: string[] = [];
  for (const [label, env] of [
    ["sandbox", sandboxEnv],
    ["claim", claimEnv],
  ] as const) {
    const agentId = await createAgent(cid, `Lane ${label} agent`, env.id);
    const outcome = await heartbeat(t, label, agentId, env.id);
    if (outcome.run.status !== "succeeded") {
      failures.push(`${label}: the run ended ${outcome.run.status}: ${outcome.run.error ?? ""}`);
      continue;
    }
    if (outcome.execs === 0) failures.push(`${label}: the cluster saw no exec for the run`);
    const lease = outcome.leases[0];
    if (outcome.leases.length !== 1 || lease.status !== "released") {
      failures.push(`${label}: expected one released lease: ${JSON.stringify(outcome.leases.map((l) => ({ status: l.status, id: l.providerLeaseId })))}`);
      continue;
    }
    if (lease.metadata?.backend !== label) failures.push(`${label}: the lease's backend is ${lease.metadata?.backend}`);
    if (label === "claim") {
      // A claim adopts one of the pool's Ready members: its sandbox bears the pool's name.
      const podName = lease.metadata?.kubernetesSandbox?.lease?.["pod-name"] ?? "";
      t.diagnostic(`the claim's pod: ${podName} (provider lease ${lease.providerLeaseId})`);
      if (!String(podName).startsWith(`${POOL}-`)) failures.push(`claim: the claim's pod ${podName} is not one of the pool ${POOL}'s members`);
    }
  }
  assert.deepEqual(failures, []);
});

/** The config of a claim on a warm pool the company config does not allow. */
function unallowedClaimConfig(): Record<string, unknown> {
  const { image: _image, ...noImage } = envConfig();
  return { ...noImage, backend: "claim", claim: { warmPool: UNALLOWED_POOL } };
}

test("a claim on a warm pool the operator did not allow: create succeeds, the saved probe says which pool", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  // Validation has no company, so it cannot read the operator's policy: create succeeds.
  const created = await server.api("POST", `/companies/${cid}/environments`, {
    name: "lane claim (pool not allowed)",
    driver: "sandbox",
    config: unallowedClaimConfig(),
  });
  t.diagnostic(`create: ${show(created)}`);
  assert.equal(created.status, 201, show(created));
  environments.push({ id: created.json.id, name: "lane claim (pool not allowed)" });
  const probe = await server.api("POST", `/environments/${created.json.id}/probe?companyId=${cid}`, {});
  t.diagnostic(`saved probe: ${show(probe)}`);
  recorded["saved probe, pool not allowed"] = probe.text;
  assert.equal(probe.status, 200, show(probe));
  assert.equal(probe.json?.ok, false, `the saved probe of a claim on a pool the operator did not allow succeeded: ${show(probe)}`);
  assert.ok(probe.text.includes(UNALLOWED_POOL), `the saved probe's answer does not name the pool ${UNALLOWED_POOL}: ${show(probe)}`);
});

test(
  "a claim on a warm pool the operator did not allow: the draft probe says which pool",
  async (t) => {
    const cid = need("companyId", "company, kubeconfig secret and plugin config");
    const draft = await server.api("POST", `/companies/${cid}/environments/probe-config`, {
      name: "lane claim (pool not allowed, draft)",
      driver: "sandbox",
      config: unallowedClaimConfig(),
    });
    t.diagnostic(`draft probe: ${show(draft)}`);
    recorded["draft probe, pool not allowed"] = draft.text;
    assert.equal(draft.status, 200, show(draft));
    assert.equal(draft.json?.ok, false, `the draft probe of a claim on a pool the operator did not allow answers ok: ${draft.json?.summary}`);
    assert.ok(draft.text.includes(UNALLOWED_POOL), `the draft probe's answer does not name the pool ${UNALLOWED_POOL}`);
  },
);

test("reuseLease on backend sandbox: the second run on an issue resumes the first run's lease", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  // Paperclip scopes a reusable lease by environment, execution workspace and agent. A run has
  // an execution workspace only on an issue of a project, and the issue keeps it for its next
  // run only with executionWorkspacePreference "reuse_existing", which an issue carries only
  // when the instance's (experimental) isolated workspaces are on: what an operator does.
  const experimental = await server.api("PATCH", "/instance/settings/experimental", { enableIsolatedWorkspaces: true });
  t.diagnostic(`PATCH /instance/settings/experimental: ${show(experimental)}`);
  assert.equal(experimental.status, 200, show(experimental));
  const project = await server.api("POST", `/companies/${cid}/projects`, { name: "Lane reuse", status: "in_progress" });
  assert.equal(project.status, 201, show(project));

  const created = await server.api("POST", `/companies/${cid}/environments`, {
    name: "lane reusable sandbox",
    driver: "sandbox",
    // Reusable leases need a workspace volume (release suspends the Sandbox and keeps its disk).
    config: envConfig({ backend: "sandbox", reuseLease: true, sandbox: { workspaceVolume: { size: "1Gi" } } }),
  });
  assert.equal(created.status, 201, show(created));
  state.reuseEnvId = created.json.id;
  environments.push({ id: created.json.id, name: "lane reusable sandbox" });
  assert.equal(created.json.config.reuseLease, true, show(created));
  const envId = created.json.id as string;
  const agentId = await createAgent(cid, "Lane reuse agent", envId);

  // The first run: assigning a todo issue to the agent wakes it.
  let since = await cluster.lastSeq();
  const firstMark = since;
  const issue = await server.api("POST", `/companies/${cid}/issues`, {
    title: "Lane: two runs on one issue",
    status: "todo",
    projectId: project.json.id,
    assigneeAgentId: agentId,
    executionWorkspacePreference: "reuse_existing",
  });
  t.diagnostic(`issue: HTTP ${issue.status} ${issue.json?.identifier ?? ""} executionWorkspacePreference ${issue.json?.executionWorkspacePreference}`);
  assert.equal(issue.status, 201, show(issue));
  const issueId = issue.json.id as string;
  let runs: any[] = [];
  const firstRunId = await waitFor(
    `the assignment of issue ${issueId} to start a run of agent ${agentId}`,
    async () => {
      runs = ((await server.api("GET", `/companies/${cid}/heartbeat-runs?agentId=${agentId}`)).json ?? []) as any[];
      return runs.find((r) => r.contextSnapshot?.issueId === issueId)?.id as string | undefined;
    },
    { deadlineMs: 120_000, intervalMs: 500, describe: () => JSON.stringify(runs.map((r) => ({ id: r.id, status: r.status, issueId: r.contextSnapshot?.issueId }))) },
  );
  const first = await finishRun(t, "reuse: first run", firstRunId, envId, since);
  assert.equal(first.run.status, "succeeded", `the first run ended ${first.run.status}: ${first.run.error ?? ""}`);
  const afterFirst = await server.api("GET", `/issues/${issueId}`);
  t.diagnostic(`the issue after the first run: status ${afterFirst.json?.status}, execution workspace ${afterFirst.json?.executionWorkspaceId}, preference ${afterFirst.json?.executionWorkspacePreference}`);

  // The suspended sandbox stays between runs: also the leak audit's positive control (its
  // label selector finds what the plugin creates).
  const kept = await managedObjects(cluster);
  t.diagnostic(`between the runs the cluster holds: ${kept.join(", ")}`);
  assert.ok(kept.some((o) => o.startsWith("Sandbox/")), `no Sandbox kept between the runs of a reusable lease: ${kept.join(", ")}`);

  // The second run on the issue: the stand-in leaves the issue open, so Paperclip continues
  // it with a run of its own (the agent woken on the issue again); only if it does not, the
  // lane wakes the agent on the issue itself.
  since = await cluster.lastSeq();
  let secondRunId: string | undefined;
  try {
    secondRunId = await waitFor(
      `Paperclip to continue issue ${issueId} with a second run`,
      async () => {
        runs = ((await server.api("GET", `/companies/${cid}/heartbeat-runs?agentId=${agentId}`)).json ?? []) as any[];
        return runs.find((r) => r.id !== firstRunId && r.contextSnapshot?.issueId === issueId)?.id as string | undefined;
      },
      { deadlineMs: 60_000, intervalMs: 500, describe: () => JSON.stringify(runs.map((r) => ({ id: r.id, status: r.status }))) },
    );
  } catch (error) {
    t.diagnostic(`${error instanceof Error ? error.message : String(error)}: the lane wakes the agent on the issue`);
    secondRunId = await wake(t, agentId, { payload: { issueId } });
  }
  const second = await finishRun(t, "reuse: second run", secondRunId, envId, since);
  assert.equal(second.run.status, "succeeded", `the second run ended ${second.run.status}: ${second.run.error ?? ""}`);

  // Paperclip lists the reusable leases as a run starts and resumes only a released one, but it
  // releases a run's lease a moment after the run ends and may start its continuation in
  // between (seen on a loaded machine: the continuation started 0.8 s before the release).
  // That run then gets a lease of its own: Paperclip's race, which the plugin cannot close. The
  // lane then lets every run end and every lease be released, and wakes the agent on the issue
  // itself: that run starts with the released leases listed and must resume one.
  let resumingRunId = secondRunId;
  const firstReleased = first.leases[0]?.releasedAt as string | undefined;
  const raced =
    second.leases[0]?.metadata?.sandboxLeaseAcquisition?.outcome === "created" &&
    typeof firstReleased === "string" &&
    typeof second.run.startedAt === "string" &&
    Date.parse(second.run.startedAt) < Date.parse(firstReleased ?? "");
  if (raced) {
    t.diagnostic(
      `Paperclip started the second run (${second.run.startedAt}) before it released the first run's lease (${firstReleased}), so it could not resume it: the lane wakes the agent on the issue once every lease is released`,
    );
    await waitFor(
      `every run of agent ${agentId} to end and every lease of environment ${envId} to be released`,
      async () => {
        runs = ((await server.api("GET", `/companies/${cid}/heartbeat-runs?agentId=${agentId}`)).json ?? []) as any[];
        const leases = ((await server.api("GET", `/environments/${envId}/leases`)).json ?? []) as any[];
        const idle = runs.every((r) => !["queued", "scheduled_retry", "running"].includes(r.status));
        return idle && leases.every((l) => l.status !== "active") ? true : undefined;
      },
      { deadlineMs: 300_000, intervalMs: 1000, describe: () => JSON.stringify(runs.map((r) => ({ id: r.id, status: r.status }))) },
    );
    since = await cluster.lastSeq();
    resumingRunId = await wake(t, agentId, { payload: { issueId } });
    const third = await finishRun(t, "reuse: run woken after the release", resumingRunId, envId, since);
    assert.equal(third.run.status, "succeeded", `the woken run ended ${third.run.status}: ${third.run.error ?? ""}`);
  }

  // Let whatever else Paperclip runs on the issue end, then close it (as its user would) so
  // that Paperclip stops continuing it: the leak audit deletes the environment, which a
  // running lease blocks.
  const settle = async (what: string) =>
    await waitFor(
      `every run of agent ${agentId} to end (${what})`,
      async () => {
        runs = ((await server.api("GET", `/companies/${cid}/heartbeat-runs?agentId=${agentId}`)).json ?? []) as any[];
        return runs.every((r) => !["queued", "scheduled_retry", "running"].includes(r.status)) ? true : undefined;
      },
      { deadlineMs: 300_000, intervalMs: 1000, describe: () => JSON.stringify(runs.map((r) => ({ id: r.id, status: r.status }))) },
    );
  await settle("before the issue is closed");
  const done = await server.api("PATCH", `/issues/${issueId}`, { status: "done" });
  t.diagnostic(`PATCH the issue to done: HTTP ${done.status} ${done.json?.status ?? done.text.slice(0, 300)}`);
  assert.equal(done.status, 200, show(done));
  await settle("after the issue is closed");
  t.diagnostic(
    `the agent's runs: ${JSON.stringify(runs.map((r) => ({ id: r.id, status: r.status, source: r.invocationSource, error: r.error ?? undefined })), null, 1)}`,
  );
  const writes = (await cluster.requestLog(firstMark)).entries.filter(
    (e) => ["sandboxes", "persistentvolumeclaims"].includes(e.resource) && ["create", "patch", "update", "delete"].includes(e.verb),
  );
  t.diagnostic(`the cluster's writes of sandboxes and PVCs since the first run: ${writes.map((e) => `${e.seq} ${e.verb} ${e.resource}${e.subresource ? `/${e.subresource}` : ""} ${e.name} (${e.user}) ${e.code}`).join("; ")}`);
  const all = (await server.api("GET", `/environments/${envId}/leases`)).json as any[];
  const summary = all.map((l) => ({
    run: l.heartbeatRunId,
    status: l.status,
    policy: l.leasePolicy,
    providerLeaseId: l.providerLeaseId,
    executionWorkspaceId: l.executionWorkspaceId,
    acquisition: l.metadata?.sandboxLeaseAcquisition,
    scope: l.metadata?.reusableSandboxLease ? "yes" : "none",
  }));
  t.diagnostic(`leases: ${JSON.stringify(summary, null, 1)}`);
  const firstLease = all.find((l) => l.heartbeatRunId === firstRunId);
  const resumingLease = all.find((l) => l.heartbeatRunId === resumingRunId);
  assert.ok(firstLease && resumingLease, `a run has no lease: ${JSON.stringify(summary)}`);
  assert.ok(all.every((l) => l.leasePolicy === "reuse_by_environment"), "a lease is not reuse_by_environment");
  assert.ok(firstLease.executionWorkspaceId, `the first run's lease has no execution workspace (Paperclip then never reuses it): ${JSON.stringify(summary)}`);
  assert.equal(resumingLease.executionWorkspaceId, firstLease.executionWorkspaceId, "the runs had different execution workspaces");
  assert.equal(resumingLease.metadata?.sandboxLeaseAcquisition?.outcome, "resumed", `the run's lease was not resumed: ${JSON.stringify(resumingLease.metadata?.sandboxLeaseAcquisition)}`);
  const earlier = all.filter((l) => l.heartbeatRunId !== resumingRunId).map((l) => l.providerLeaseId);
  assert.ok(earlier.includes(resumingLease.providerLeaseId), `the resumed provider lease is none of the earlier runs': ${JSON.stringify(summary)}`);
  if (!raced) assert.equal(resumingLease.providerLeaseId, firstLease.providerLeaseId, "the second run's provider lease is not the first's");
});

test("the reference provider beside ours: probes succeed, an agent run fails saying it cannot run commands", async (t) => {
  const cid = need("companyId", "company, kubeconfig secret and plugin config");
  const pluginId = await installPlugin(t, referencePluginDir(), REFERENCE_PLUGIN_KEY);
  state.referencePluginId = pluginId;
  // The reference provider declares no cluster access: no kubeconfig, the operator allows that.
  const config = await server.api("POST", `/plugins/${pluginId}/config`, { companyId: cid, configJson: { allowAmbientCredentials: true } });
  t.diagnostic(`POST /plugins/:id/config (reference): ${show(config)}`);
  assert.equal(config.status, 200, show(config));
  const capabilities = await waitFor(
    `GET /companies/:id/environments/capabilities to list the sandbox provider ${REFERENCE_DRIVER}`,
    async () => (await server.api("GET", `/companies/${cid}/environments/capabilities`)).json?.sandboxProviders?.[REFERENCE_DRIVER] ?? undefined,
    { deadlineMs: 60_000 },
  );
  t.diagnostic(`capabilities of ${REFERENCE_DRIVER}: ${JSON.stringify({ ...capabilities, configSchema: "..." })}`);
  // Both drivers stay listed: the swap is beside ours, not instead of it.
  const both = (await server.api("GET", `/companies/${cid}/environments/capabilities`)).json?.sandboxProviders ?? {};
  assert.ok(both[DRIVER] && both[REFERENCE_DRIVER], `both drivers should be listed: ${Object.keys(both).join(", ")}`);

  const env = await environmentRoundTrip(t, cid, "lane reference", { provider: REFERENCE_DRIVER, leaseTtlSeconds: 600 });
  const agentId = await createAgent(cid, "Lane reference agent", env.id);
  const outcome = await heartbeat(t, "reference", agentId, env.id);
  const text = [outcome.run.error, outcome.run.errorCode].filter(Boolean).join(" ");
  recorded["reference provider run failure"] = `status ${outcome.run.status}; error ${JSON.stringify(outcome.run.error)}; errorCode ${JSON.stringify(outcome.run.errorCode)}`;
  t.diagnostic(`the run's log (tail):\n${outcome.log.slice(-3000)}`);
  assert.equal(outcome.run.status, "failed", `a run on the reference provider (no workload) ended ${outcome.run.status}`);
  assert.match(text, /unsupported/i, `the failure Paperclip records does not say the provider cannot run commands: ${text}`);
  for (const lease of outcome.leases) assert.notEqual(lease.status, "active", `the failed run's lease is still active: ${JSON.stringify(lease)}`);
});

test("no Paperclip record holds a secret value in plain text (nor base64, base64url, hex)", async (t) => {
  need("secretEnvEnvId", "secretEnv");
  const dump = await dumpDatabase(server.pgPort);
  t.diagnostic(`database dump: ${dump.split("\n").length} rows`);
  assert.ok(dump.includes(need("secretEnvEnvId", "secretEnv")), "the dump does not hold the environments (is it the right database?)");
  const found = findCanaries(dump, [REF_CANARY, INLINE_CANARY, OWNERSHIP_KEY]);
  assert.deepEqual(found, [], `secret values found in the database:\n${found.join("\n")}`);
});

test("nothing the plugin created is left on the cluster, and no lease is left active", async (t) => {
  // A reusable lease outlives its runs by design: destroy it the way Paperclip does, by
  // deleting its environment with destroyReusableSandboxLeases.
  if (state.reuseEnvId) {
    const deleted = await server.api("DELETE", `/environments/${state.reuseEnvId}?destroyReusableSandboxLeases=true`);
    t.diagnostic(`DELETE the reusable environment: HTTP ${deleted.status} destroyedReusableSandboxLeaseCount ${deleted.json?.destroyedReusableSandboxLeaseCount}`);
    assert.equal(deleted.status, 200, show(deleted));
  }
  // Paperclip's records: no lease of any environment the lane made is still active (the
  // reference provider's leases have nothing on the cluster; they are audited here).
  const active: string[] = [];
  for (const env of environments) {
    if (env.id === state.reuseEnvId) continue;
    const leases = ((await server.api("GET", `/environments/${env.id}/leases`)).json ?? []) as any[];
    for (const l of leases) if (l.status === "active") active.push(`${env.name}: lease ${l.id} (${l.providerLeaseId}) is active`);
  }
  // The cluster: nothing labelled app.kubernetes.io/managed-by, and nothing of those kinds
  // that was not there before the lane (whatever its labels) but the warm pool's own members.
  let labelled: string[] = [];
  let left: string[] = [];
  await waitFor(
    "the cluster to hold nothing the plugin created (jobs, pods, secrets, PVCs, sandboxes, sandbox claims; the warm pool's unclaimed members excepted)",
    async () => {
      labelled = await managedObjects(cluster);
      left = leftovers(await clusterObjects(cluster), baseline);
      return labelled.length === 0 && left.length === 0 ? true : undefined;
    },
    { deadlineMs: 180_000, intervalMs: 2000, describe: () => `labelled: ${labelled.join(", ") || "none"}; new since the lane started: ${left.join(", ") || "none"}` },
  );
  const remaining = (await clusterObjects(cluster)).filter((o) => !baseline.has(o.uid)).map((o) => o.id);
  t.diagnostic(`left on the cluster (the warm pool's members): ${remaining.join(", ") || "nothing"}`);
  assert.deepEqual(active, []);
});

test("figures (for BENCHMARKS.md; printed, never asserted)", async (t) => {
  const wallMs = Date.now() - laneStarted;
  await commandDurations(server, need("pluginId", "plugin install"), figures);
  t.diagnostic(`figures:\n${figures.map(describeFigures).join("\n")}\nlane wall time (up to here) ${Math.round(wallMs / 1000)} s`);
  t.diagnostic(`recorded texts:\n${Object.entries(recorded).map(([k, v]) => `${k}:\n${v}`).join("\n\n")}`);
  t.diagnostic(`written to ${writeFigures(LANE_DIR, { paperclip: paperclipVersion(), laneWallMs: wallMs, runs: figures, recorded })}`);
});
