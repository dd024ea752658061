// Paperclip's environment-driver params and results onto the WIT records `serve` speaks.
//
// | Paperclip                                  | WIT (sandbox-host serve)                                  |
// |--------------------------------------------|-----------------------------------------------------------|
// | environmentId + runId (+ generation)       | acquire-request.acquisition-id (see `acquisitionId`)      |
// | runId, agentId                             | acquire-request.run-id, agent-id                          |
// | requestedExpiresAt (ISO)                   | acquire-request.requested-expires-at (epoch ms)           |
// | config.secretEnv                           | acquire-request.env (secret: true)                        |
// | config.reuseLease                          | acquire-request.reusable                                  |
// | config minus plugin/Paperclip keys         | config (validate-config, probe, every lease-ref)          |
// | lease.providerLeaseId                      | lease.provider-lease-id                                   |
// | lease.metadata.kubernetesSandbox.lease     | the whole WIT lease, stored and handed back unchanged     |
// | lease.expiresAt (ISO)                      | lease.expires-at (epoch ms; null: no expiry)              |
// | resume -> { providerLeaseId: null, ... }   | resume-outcome.expired(reason)                            |
// | validation.errors / warnings ("path: msg") | validation.errors / warnings (config-problem)             |
// | probe.diagnostics                          | probe-result.diagnostics                                  |
// | execute lease (providerLeaseId, metadata)  | execute lease (as resume-check and release take it)       |
// | execute command, args, cwd, stdin          | execute request.command, args, cwd, stdin (null: none)    |
// | execute env (NAME -> value)                | execute request.env (secret: false)                       |
// | execute timeoutMs                          | execute request.timeout-ms (null: the call's deadline)    |
// | exitCode, signal, timedOut                 | execute result exit-code, signal, timed-out               |
// | stdout, stderr (+ TRUNCATED_NOTE)          | execute result stdout, stderr (+ *-truncated)             |
import { createHash } from "node:crypto";

import type { PluginEnvironmentExecuteParams, PluginEnvironmentExecuteResult, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";

import { ServeError } from "./serve-client.js";

/** The key of this plugin's part of a lease's metadata; Paperclip adds keys of its own. */
export const METADATA_KEY = "kubernetesSandbox";

/** A WIT lease, as `serve` returns it (kebab-case). */
export type WitLease = Record<string, unknown> & { "provider-lease-id": string; "expires-at"?: number | null };

/** What the plugin keeps in a Paperclip lease's metadata. */
export interface StoredLease {
  /** The WIT lease, unchanged. */
  lease: WitLease;
  /** Which acquisition made it: `environmentId` and `runId` hashed, and the generation. */
  acquisition: { key: string; generation: number };
}

/**
 * The acquisition id of a run's sandbox: a hash of the environment and run ids (so a retried
 * acquire of the same run adopts), and a generation after the first (so a fresh acquire after
 * the run's lease expired or was destroyed gets a new sandbox). Lowercase hex: it becomes part
 * of object names and label values.
 */
export function acquisitionKey(environmentId: string, runId: string): string {
  return createHash("sha256").update(environmentId).update("\0").update(runId).digest("hex").slice(0, 24);
}

export function acquisitionId(key: string, generation: number): string {
  return generation === 0 ? key : `${key}-${generation}`;
}

/** An ISO 8601 time with its offset: `Date.parse` alone takes other text, and local time. */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** ISO 8601 to epoch millis; an error naming the field when it is not a time. */
export function epochMillis(iso: string, field: string): number {
  const ms = ISO_8601.test(iso) ? Date.parse(iso) : Number.NaN;
  if (Number.isNaN(ms)) {
    throw new ServeError("plugin", "invalid-params", `${field} is not an ISO 8601 time: ${JSON.stringify(iso.slice(0, 40))}`, false);
  }
  return ms;
}

/** Where the agent's workspace is when nothing else says: the config's `workingDir`, else this. */
export const DEFAULT_WORKSPACE = "/workspace";

/**
 * A WIT lease as Paperclip stores it; `remoteCwd` (the config's `workingDir`) is where
 * Paperclip realizes the workspace and runs the agent's commands, and `sandboxName` names the
 * pod Paperclip's probe reports it connected to.
 */
export function paperclipLease(lease: WitLease, acquisition: StoredLease["acquisition"], provider: Record<string, unknown>): PluginEnvironmentLease {
  const expires = lease["expires-at"];
  const stored: StoredLease = { lease, acquisition };
  const remoteCwd = typeof provider.workingDir === "string" && provider.workingDir.startsWith("/") ? provider.workingDir : DEFAULT_WORKSPACE;
  const pod = lease["pod-name"];
  return {
    providerLeaseId: lease["provider-lease-id"],
    expiresAt: typeof expires === "number" ? new Date(expires).toISOString() : null,
    metadata: { [METADATA_KEY]: stored, remoteCwd, ...(typeof pod === "string" && pod ? { sandboxName: pod } : {}) },
  };
}

/**
 * The sandbox directory a workspace is realized in: the one Paperclip asks for (the lease's
 * `remoteCwd`, handed back), else the lease's, else the config's; always absolute.
 */
export function workspaceDir(remotePath: string | undefined, metadata: Record<string, unknown> | undefined, provider: Record<string, unknown>): string {
  const candidates = [remotePath, metadata?.remoteCwd, provider.workingDir];
  const found = candidates.find((c): c is string => typeof c === "string" && c.startsWith("/") && !c.includes("\0"));
  return found ?? DEFAULT_WORKSPACE;
}

/** The stored lease of a Paperclip lease's metadata, if it holds one. */
export function storedLease(metadata: Record<string, unknown> | undefined): StoredLease | undefined {
  const stored = metadata?.[METADATA_KEY] as StoredLease | undefined;
  if (!stored || typeof stored !== "object" || typeof stored.lease?.["provider-lease-id"] !== "string") return undefined;
  return stored;
}

/** The backend and namespace a Kubernetes provider lease id names (`k8s:<backend>:<namespace>:<name>`). */
const LEASE_ID = /^k8s:(sandbox|job|claim):([a-z0-9-]{1,63}):/;

/**
 * The WIT lease to hand back for `providerLeaseId`: the stored one when the metadata holds it
 * for this id, else one with the id alone (`destroy` works from it; `resume-check` answers
 * it), its backend and namespace read from the id, which outlives any config edit.
 */
export function witLease(providerLeaseId: string, metadata: Record<string, unknown> | undefined, provider: Record<string, unknown>): WitLease {
  const stored = storedLease(metadata);
  if (stored && stored.lease["provider-lease-id"] === providerLeaseId) return stored.lease;
  const named = LEASE_ID.exec(providerLeaseId);
  return {
    "provider-lease-id": providerLeaseId,
    backend: named?.[1] ?? (provider.backend === "job" ? "job" : "sandbox"),
    namespace: named?.[2] ?? (typeof provider.namespace === "string" ? provider.namespace : ""),
    "api-version": "",
    "workload-uid": "",
    metadata: "{}",
  };
}

/** The command of an execute, as `serve`'s `execute` takes it in `request` (kebab-case). */
export interface WitExecRequest {
  command: string;
  args: string[];
  cwd: string | null;
  env: { name: string; value: string; secret: boolean }[];
  stdin: string | null;
  "timeout-ms": number | null;
}

/** What `serve`'s `execute` answers. */
export interface WitExecResult {
  "exit-code": number | null;
  signal: string | null;
  "timed-out": boolean;
  stdout: string;
  stderr: string;
  "stdout-truncated": boolean;
  "stderr-truncated": boolean;
}

/**
 * Appended to a stream the provider cut at its output cap: the SDK's result has no field that
 * says so, and output that merely stops would read as the whole of it.
 */
export const TRUNCATED_NOTE = "\n[output truncated by the sandbox provider]";

const invalidParams = (message: string) => new ServeError("plugin", "invalid-params", message, false);

/** The longest `timeout-ms` the WIT carries (a u32, about 49 days). */
const MAX_TIMEOUT_MS = 0xffff_ffff;

/**
 * Paperclip's execute params onto the WIT request: absent fields are null (the sandbox's own
 * working directory, an empty stdin, no timeout but the call's deadline); `env` are plain
 * variables of this command (the lease's `secretEnv` is already in the sandbox, and redacted
 * from output). `bypassSession` has no meaning here: every command runs on its own.
 */
export function execRequest(params: PluginEnvironmentExecuteParams): WitExecRequest {
  if (typeof params.command !== "string" || params.command === "") throw invalidParams("command must be a non-empty string");
  const args = params.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) throw invalidParams("args must be a list of strings");
  if (params.cwd !== undefined && params.cwd !== null && typeof params.cwd !== "string") throw invalidParams("cwd must be a string");
  const env = params.env ?? {};
  if (typeof env !== "object" || env === null || Array.isArray(env)) throw invalidParams("env must be an object of NAME -> value");
  const vars = Object.entries(env).map(([name, value]) => {
    // The value is not shown: it may be a credential the caller passes on.
    if (typeof value !== "string") throw invalidParams(`env ${JSON.stringify(name.slice(0, 64))} must be a string`);
    return { name, value, secret: false };
  });
  if (params.stdin !== undefined && params.stdin !== null && typeof params.stdin !== "string") throw invalidParams("stdin must be a string");
  let timeoutMs: number | null = null;
  if (params.timeoutMs !== undefined && params.timeoutMs !== null) {
    if (typeof params.timeoutMs !== "number" || !Number.isFinite(params.timeoutMs) || params.timeoutMs < 0) {
      throw invalidParams("timeoutMs must be a number of milliseconds, at least 0");
    }
    timeoutMs = Math.min(Math.ceil(params.timeoutMs), MAX_TIMEOUT_MS);
  }
  return {
    command: params.command,
    args,
    cwd: params.cwd || null,
    env: vars,
    stdin: params.stdin ?? null,
    "timeout-ms": timeoutMs,
  };
}

/**
 * A WIT exec result as the SDK's: a stream the provider truncated ends with `TRUNCATED_NOTE`,
 * and `metadata` says which were.
 */
export function execResult(result: WitExecResult): PluginEnvironmentExecuteResult {
  const stream = (text: string, truncated: boolean) => (truncated ? `${text}${TRUNCATED_NOTE}` : text);
  const stdoutTruncated = result["stdout-truncated"] === true;
  const stderrTruncated = result["stderr-truncated"] === true;
  return {
    exitCode: typeof result["exit-code"] === "number" ? result["exit-code"] : null,
    signal: typeof result.signal === "string" ? result.signal : null,
    timedOut: result["timed-out"] === true,
    stdout: stream(result.stdout ?? "", stdoutTruncated),
    stderr: stream(result.stderr ?? "", stderrTruncated),
    metadata: { stdoutTruncated, stderrTruncated },
  };
}

/** An error Paperclip's worker protocol carries: the SDK keeps only the message. */
export function paperclipError(e: unknown): Error {
  if (e instanceof ServeError) {
    const where = e.path ? ` at ${e.path}` : "";
    const error = new Error(`${e.kind}${where}${e.retryable ? " (retryable)" : ""}: ${e.message}`);
    error.name = "SandboxProviderError";
    return error;
  }
  return e instanceof Error ? e : new Error(String(e));
}
