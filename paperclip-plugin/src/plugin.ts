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
  PluginEnvironmentReleaseLeaseParams,
  PluginEnvironmentResumeLeaseParams,
  PluginEnvironmentValidateConfigParams,
  PluginEnvironmentValidationResult,
} from "@paperclipai/plugin-sdk";

import { type EnvironmentConfig, hostSettings, problemText, splitEnvironmentConfig } from "./config.js";
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
} from "./mapping.js";
import { ServeClient, ServeError } from "./serve-client.js";

let context: PluginContext | undefined;
const hosts = new Hosts();

/** Where the generations of acquisitions are kept in Paperclip's plugin state. */
const GENERATIONS = "acquisition-generations";

/** The worker's context; a call before `setup` is a host bug, refused. */
function ctx(): PluginContext {
  if (!context) throw new ServeError("plugin", "not-initialized", "the worker was called before initialize; initialize it first", true);
  return context;
}

/** The operator's instance config for a company. */
async function instanceConfig(companyId?: string): Promise<Record<string, unknown>> {
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

/** An environment config split, and the serve process for it; every problem refuses the call. */
async function prepare(config: unknown, companyId?: string): Promise<{ env: EnvironmentConfig; host: ServeClient }> {
  const env = splitEnvironmentConfig(config);
  const { settings, problems } = hostSettings(await instanceConfig(companyId), env.kubeconfig);
  const all = [...env.problems, ...problems];
  if (all.length > 0) {
    throw new ServeError("plugin", "invalid-config", all.map(problemText).join("; "), false, all[0]?.path);
  }
  return { env, host: hosts.get(settings) };
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
  const { env, host } = await prepare(params.config, params.companyId);
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
    const env = splitEnvironmentConfig(params.config);
    const { settings, problems } = hostSettings(await instanceConfig(), env.kubeconfig);
    // Every problem is reported: the plugin's own, then the provider's.
    const local = [...env.problems, ...problems].map(problemText);
    let validation: { ok: boolean; errors: WitProblem[]; warnings: WitProblem[]; "normalized-config"?: string | null };
    try {
      validation = (await hosts.get(settings).call("validate-config", { config: env.provider })) as typeof validation;
    } catch (e) {
      return { ok: false, errors: [...local, paperclipError(e).message] };
    }
    const ok = validation.ok && local.length === 0;
    const result: PluginEnvironmentValidationResult = {
      ok,
      errors: [...local, ...validation.errors.map(problemText)],
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
      const { env, host } = await prepare(params.config, params.companyId);
      probe = (await host.call("probe", { config: env.provider })) as typeof probe;
    } catch (e) {
      const message = paperclipError(e).message;
      return { ok: false, summary: message, diagnostics: [{ severity: "error", code: "host-unavailable", message }] };
    }
    return { ok: probe.ok, summary: probe.summary, diagnostics: probe.diagnostics };
  },

  async onEnvironmentAcquireLease(params: PluginEnvironmentAcquireLeaseParams): Promise<PluginEnvironmentLease> {
    return guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId);
      const key = acquisitionKey(params.environmentId, params.runId);
      const current = await generation(params.companyId, key);
      const request = {
        config: env.provider,
        "run-id": params.runId,
        "acquisition-id": acquisitionId(key, current),
        "agent-id": params.agentId ?? null,
        "requested-expires-at": params.requestedExpiresAt ? epochMillis(params.requestedExpiresAt, "requestedExpiresAt") : null,
        env: Object.entries(env.secretEnv).map(([name, value]) => ({ name, value, secret: true })),
        reusable: env.reusable,
      };
      const lease = (await host.call("acquire", request)) as WitLease;
      ctx().logger.info("sandbox acquired", { providerLeaseId: lease["provider-lease-id"], runId: params.runId });
      if (env.reusable && lease.reusable !== true) {
        ctx().logger.warn("reuseLease is set but the lease is ephemeral: reuse needs backend sandbox with sandbox.workspaceVolume", {
          providerLeaseId: lease["provider-lease-id"],
        });
      }
      return paperclipLease(lease, { key, generation: current }, env.provider);
    });
  },

  async onEnvironmentResumeLease(params: PluginEnvironmentResumeLeaseParams): Promise<PluginEnvironmentLease> {
    return guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId);
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

  async onEnvironmentExecute(params: PluginEnvironmentExecuteParams): Promise<PluginEnvironmentExecuteResult> {
    return guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId);
      const providerLeaseId = params.lease?.providerLeaseId;
      if (!providerLeaseId) {
        throw new ServeError("plugin", "invalid-params", "the lease has no providerLeaseId: acquire or resume a lease first", false);
      }
      const request = execRequest(params);
      const lease = witLease(providerLeaseId, params.lease.metadata, env.provider);
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
      return execResult(result);
    });
  },

  async onEnvironmentReleaseLease(params: PluginEnvironmentReleaseLeaseParams): Promise<void> {
    await guarded(async () => {
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
