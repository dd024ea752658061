// The environment driver: each Paperclip call becomes one `sandbox-host serve` request (see
// `mapping.ts` for the table), on a serve process per set of host settings (`hosts.ts`).
import { definePlugin } from "@paperclipai/plugin-sdk";
import type {
  PluginContext,
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentDestroyLeaseParams,
  PluginEnvironmentExecuteParams,
  PluginEnvironmentExecuteResult,
  PluginEnvironmentLease,
  PluginEnvironmentProbeParams,
  PluginEnvironmentProbeResult,
  PluginEnvironmentRealizeWorkspaceParams,
  PluginEnvironmentRealizeWorkspaceResult,
  PluginEnvironmentReleaseLeaseParams,
  PluginEnvironmentResumeLeaseParams,
  PluginEnvironmentValidateConfigParams,
  PluginEnvironmentValidationResult,
} from "@paperclipai/plugin-sdk";

import { type EnvironmentConfig, type Problem, hostSettings, offlineSettings, problemText, splitEnvironmentConfig } from "./config.js";
import { Hosts } from "./hosts.js";
import {
  type StoredLease,
  type WitExecResult,
  type WitLease,
  acquisitionId,
  acquisitionKey,
  epochMillis,
  execRequest,
  execResult,
  paperclipError,
  paperclipLease,
  storedLease,
  witLease,
  workspaceDir,
} from "./mapping.js";
import { ServeClient, ServeError } from "./serve-client.js";
import { unknownKeys } from "./unknown-keys.js";

let context: PluginContext | undefined;
const hosts = new Hosts();

/** The metric of each command's duration in milliseconds (`environmentExecute`). */
export const COMMAND_METRIC = "sandbox.command.duration_ms";

/** Where the generations of acquisitions are kept in Paperclip's plugin state. */
const GENERATIONS = "acquisition-generations";

/** The worker's context; a call before `setup` is a host bug, refused. */
function ctx(): PluginContext {
  if (!context) throw new ServeError("plugin", "not-initialized", "the worker was called before initialize; initialize it first", true);
  return context;
}

/**
 * The operator's config of the plugin for a company: Paperclip keeps plugin config per company
 * and answers `config.get` only inside a call that names one.
 */
async function instanceConfig(companyId: string): Promise<Record<string, unknown>> {
  return ctx().config.get(companyId);
}

/**
 * The generation of the next acquire of a run (by acquisition key), raised when the run's lease
 * expired or was released or destroyed: a fresh acquire then gets a new sandbox, never the dead
 * one; a retried acquire of a live lease keeps it and adopts. Kept in Paperclip's plugin state,
 * so a restarted worker or another replica agrees.
 */
async function generation(companyId: string, key: string): Promise<number> {
  const stored = await ctx().state.get({ scopeKind: "company", scopeId: companyId, namespace: GENERATIONS, stateKey: key });
  return typeof stored === "number" && Number.isInteger(stored) && stored >= 0 ? stored : 0;
}

/** Refuses a call with the first of `problems` (all of them in the message). */
function refuse(problems: Problem[]): never {
  const [first, ...rest] = problems;
  const message = [first?.message ?? "", ...rest.map(problemText)].join("; ");
  throw new ServeError("plugin", "invalid-config", message, false, first?.path || undefined);
}

/**
 * How a call reads its config. `strict` (probe, acquire: the environment's stored config): every
 * problem refuses it, unknown keys included, as validation refuses them. `lease` (resume,
 * realize, execute): Paperclip rebuilds that config from the lease's metadata too (`agentId`,
 * this plugin's `kubernetesSandbox`, ...), so keys the provider does not know are dropped, not
 * refused. `cleanup` (release, destroy): as `lease`, and refused only for what it cannot do
 * without (the cluster, the policy), so a config that went bad never keeps a sandbox alive.
 */
type ConfigUse = "strict" | "lease" | "cleanup";

/**
 * An environment config of a call with a company (secrets resolved by Paperclip), and the serve
 * process for it under the company's policy (see `ConfigUse`).
 */
async function prepare(config: unknown, companyId: string, use: ConfigUse): Promise<{ env: EnvironmentConfig; host: ServeClient }> {
  const env = splitEnvironmentConfig(config, true);
  const { settings, problems } = hostSettings(await instanceConfig(companyId), env.kubeconfig);
  const needed = (p: Problem) => use !== "cleanup" || p.path === "" || p.path.startsWith("/kubeconfig");
  const all = [...env.problems.filter(needed), ...problems];
  if (all.length > 0) refuse(all);
  const host = hosts.get(settings);
  const unknown = unknownKeys(env.provider, await host.configSchema());
  if (use === "strict" && unknown.length > 0) refuse(unknown);
  for (const { path } of unknown) {
    const key = path.split("/")[1];
    if (key !== undefined && path === `/${key}`) delete env.provider[key];
  }
  return { env, host };
}

/** A call that runs something in a lease's sandbox: its config, serve process and WIT lease. */
async function inLease(params: {
  config: Record<string, unknown>;
  companyId: string;
  lease: PluginEnvironmentLease;
}): Promise<{ env: EnvironmentConfig; host: ServeClient; lease: WitLease }> {
  const { env, host } = await prepare(params.config, params.companyId, "lease");
  const providerLeaseId = params.lease?.providerLeaseId;
  if (!providerLeaseId) {
    throw new ServeError("plugin", "invalid-params", "the lease has no providerLeaseId: acquire or resume a lease first", false);
  }
  return { env, host, lease: witLease(providerLeaseId, params.lease.metadata, env.provider) };
}

/** The text of a failed call, as a validation error: `path: message` when it has a path. */
function failureText(e: unknown): string {
  if (e instanceof ServeError && e.path) return problemText({ path: e.path, message: e.message });
  return paperclipError(e).message;
}

/** Forgets a lease's acquisition: the next acquire of its run makes a new sandbox. */
async function retire(companyId: string, stored: StoredLease | undefined): Promise<void> {
  if (!stored?.acquisition.key) return;
  const { key } = stored.acquisition;
  const next = Math.max(await generation(companyId, key), stored.acquisition.generation + 1);
  await ctx().state.set({ scopeKind: "company", scopeId: companyId, namespace: GENERATIONS, stateKey: key }, next);
}

/**
 * Sends `method` (release or destroy) for the lease Paperclip names: its result and the WIT
 * lease sent; nothing for a null `providerLeaseId`, which Paperclip may send.
 */
async function storedLeaseCall(
  params: PluginEnvironmentReleaseLeaseParams,
  method: "release" | "destroy",
): Promise<{ result: unknown; lease: WitLease } | undefined> {
  if (!params.providerLeaseId) return undefined;
  const { env, host } = await prepare(params.config, params.companyId, "cleanup");
  const lease = witLease(params.providerLeaseId, params.leaseMetadata, env.provider);
  return { result: await host.call(method, { lease, config: env.provider }), lease };
}

/** Runs a handler, turning every failure into the error the worker protocol carries. */
async function guarded<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw paperclipError(e);
  }
}

interface WitProblem {
  path: string;
  message: string;
}

const plugin = definePlugin({
  async setup(c) {
    context = c;
  },

  async onHealth() {
    const processes = hosts.processes();
    return { status: "ok", message: `${processes.length} sandbox-host serve processes`, details: { processes } };
  },

  async onShutdown() {
    await hosts.close();
  },

  async onEnvironmentValidateConfig(params: PluginEnvironmentValidateConfigParams): Promise<PluginEnvironmentValidationResult> {
    // No company, unresolved secrets: an offline check (see config.ts).
    const env = splitEnvironmentConfig(params.config, false);
    const local = [...env.problems, ...env.storedProblems];
    const host = hosts.get(offlineSettings(env.kubeconfig));
    let validation: { ok: boolean; errors: WitProblem[]; warnings: WitProblem[]; "normalized-config"?: string | null };
    let unknown: Problem[];
    try {
      validation = (await host.call("validate-config", { config: env.provider })) as typeof validation;
      unknown = unknownKeys(env.provider, await host.configSchema());
    } catch (e) {
      return { ok: false, errors: [...local.map(problemText), failureText(e)] };
    }
    const errors = [...local, ...unknown, ...validation.errors];
    const ok = validation.ok && errors.length === 0;
    const result: PluginEnvironmentValidationResult = {
      ok,
      errors: errors.map(problemText),
      warnings: validation.warnings.map(problemText),
    };
    const normalized = validation["normalized-config"];
    if (ok && typeof normalized === "string") {
      result.normalizedConfig = { ...env.rest, ...JSON.parse(normalized) };
    }
    return result;
  },

  async onEnvironmentProbe(params: PluginEnvironmentProbeParams): Promise<PluginEnvironmentProbeResult> {
    type Diagnostic = { severity: "info" | "warning" | "error"; code: string; message: string };
    let probe: { ok: boolean; summary: string; diagnostics: Diagnostic[] };
    try {
      const { env, host } = await prepare(params.config, params.companyId, "strict");
      probe = (await host.call("probe", { config: env.provider })) as typeof probe;
    } catch (e) {
      const message = failureText(e);
      const code = e instanceof ServeError && e.kind === "invalid-config" ? "invalid-config" : "host-unavailable";
      return { ok: false, summary: message, diagnostics: [{ severity: "error", code, message }] };
    }
    return { ok: probe.ok, summary: probe.summary, diagnostics: probe.diagnostics };
  },

  async onEnvironmentAcquireLease(params: PluginEnvironmentAcquireLeaseParams): Promise<PluginEnvironmentLease> {
    return guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId, "strict");
      const key = acquisitionKey(params.environmentId, params.runId);
      const current = await generation(params.companyId, key);
      // Paperclip resumes a reusable lease only for the same execution workspace and agent: a
      // run with neither (no issue) could never get its sandbox back, so it gets one that
      // release deletes instead of one kept suspended until its expiry.
      const resumable = Boolean(params.executionWorkspaceId) && Boolean(params.agentId);
      const request = {
        config: env.provider,
        "run-id": params.runId,
        "acquisition-id": acquisitionId(key, current),
        "agent-id": params.agentId ?? null,
        "requested-expires-at": params.requestedExpiresAt ? epochMillis(params.requestedExpiresAt, "requestedExpiresAt") : null,
        env: Object.entries(env.secretEnv).map(([name, value]) => ({ name, value, secret: true })),
        reusable: env.reusable && resumable,
      };
      const lease = (await host.call("acquire", request)) as WitLease;
      ctx().logger.info("sandbox acquired", { providerLeaseId: lease["provider-lease-id"], runId: params.runId });
      if (env.reusable && !resumable) {
        ctx().logger.info("reuseLease is set, but this run has no execution workspace to reuse it in: the lease is ephemeral", {
          providerLeaseId: lease["provider-lease-id"],
        });
      } else if (env.reusable && lease.reusable !== true) {
        ctx().logger.warn("reuseLease is set but the lease is ephemeral: reuse needs backend sandbox with sandbox.workspaceVolume", {
          providerLeaseId: lease["provider-lease-id"],
        });
      }
      return paperclipLease(lease, { key, generation: current }, env.provider);
    });
  },

  async onEnvironmentResumeLease(params: PluginEnvironmentResumeLeaseParams): Promise<PluginEnvironmentLease> {
    return guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId, "lease");
      const stored = storedLease(params.leaseMetadata);
      const lease = witLease(params.providerLeaseId, params.leaseMetadata, env.provider);
      const outcome = (await host.call("resume-check", { lease, config: env.provider })) as
        | { resumable: WitLease }
        | { expired: string };
      if ("resumable" in outcome) {
        return paperclipLease(outcome.resumable, stored?.acquisition ?? { key: "", generation: 0 }, env.provider);
      }
      await retire(params.companyId, stored);
      // What Paperclip takes for "cannot resume": it destroys this lease and acquires anew.
      return { providerLeaseId: null, metadata: { expired: true, reason: outcome.expired } };
    });
  },

  async onEnvironmentRealizeWorkspace(params: PluginEnvironmentRealizeWorkspaceParams): Promise<PluginEnvironmentRealizeWorkspaceResult> {
    return guarded(async () => {
      const { env, host, lease } = await inLease(params);
      const cwd = workspaceDir(params.workspace?.remotePath, params.lease.metadata, env.provider);
      const request = { command: "mkdir", args: ["-p", "--", cwd], cwd: null, env: [], stdin: null, "timeout-ms": 60_000 };
      const made = (await host.call("execute", { lease, config: env.provider, request }, { extraMs: 60_000 })) as WitExecResult;
      if (made["exit-code"] !== 0) {
        const why = (made.stderr || made.stdout).trim().slice(0, 200) || `exit code ${String(made["exit-code"])}`;
        throw new ServeError("plugin", "workspace-failed", `cannot create the workspace ${cwd} in the sandbox: ${why}`, false);
      }
      return { cwd };
    });
  },

  async onEnvironmentExecute(params: PluginEnvironmentExecuteParams): Promise<PluginEnvironmentExecuteResult> {
    return guarded(async () => {
      const { env, host, lease } = await inLease(params);
      const request = execRequest(params);
      const started = Date.now();
      let result: WitExecResult;
      try {
        // The command may run for its whole timeout: the client waits that long on top of the
        // host's call deadline. It is never sent twice: it may have had effects.
        result = (await host.call(
          "execute",
          { lease, config: env.provider, request },
          { extraMs: request["timeout-ms"] ?? Infinity, idempotent: false },
        )) as WitExecResult;
      } catch (e) {
        // A host from before execute does not know the method; a component built against an
        // older contract answers `unsupported`.
        if (e instanceof ServeError && (e.kind === "unknown-method" || e.kind === "unsupported")) {
          throw new ServeError(
            e.source,
            "unsupported",
            `${e.message} (running commands needs a sandbox-host and provider component with execute: upgrade both)`,
            false,
          );
        }
        throw e;
      }
      // How long commands take, for the operator's dashboards (Paperclip keeps a plugin's
      // metrics with its logs): never what they are, no command and no output.
      ctx()
        .metrics.write(COMMAND_METRIC, Date.now() - started, {
          providerLeaseId: lease["provider-lease-id"],
          startedAt: new Date(started).toISOString(),
          exitCode: String(result["exit-code"]),
          timedOut: String(result["timed-out"]),
        })
        .catch((e: unknown) => ctx().logger.warn("cannot write a command metric", { error: String(e) }));
      return execResult(result);
    });
  },

  async onEnvironmentReleaseLease(params: PluginEnvironmentReleaseLeaseParams): Promise<void> {
    await guarded(async () => {
      if (params.config?.archiveOnRelease === true) {
        // Paperclip's probe asks for it; validation refuses it in a stored config (config.ts).
        ctx().logger.info("archiveOnRelease is not supported: the sandbox is released as usual", { providerLeaseId: params.providerLeaseId });
      }
      const done = await storedLeaseCall(params, "release");
      if (done && done.lease.reusable !== true) await retire(params.companyId, storedLease(params.leaseMetadata));
    });
  },

  async onEnvironmentDestroyLease(params: PluginEnvironmentDestroyLeaseParams): Promise<void> {
    await guarded(async () => {
      const done = await storedLeaseCall(params, "destroy");
      if (!done) return;
      await retire(params.companyId, storedLease(params.leaseMetadata));
      const report = done.result as { objects: { kind: string; name: string; outcome: string | { failed: string } }[] };
      const failed = report.objects.filter((o) => typeof o.outcome === "object");
      if (failed.length > 0) {
        const what = failed.map((o) => `${o.kind} ${o.name}: ${(o.outcome as { failed: string }).failed}`).join("; ");
        throw new ServeError("provider", "destroy-incomplete", `destroy left objects behind (${what}); destroy again`, true);
      }
    });
  },
});

export default plugin;
