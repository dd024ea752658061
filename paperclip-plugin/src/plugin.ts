// The environment driver: each Paperclip call becomes one `sandbox-host serve` request (see
// `mapping.ts` for the table), on a serve process per set of host settings (`hosts.ts`).
import { definePlugin } from "@paperclipai/plugin-sdk";
import type {
  PluginContext,
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentDestroyLeaseParams,
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
  type WitLease,
  acquisitionId,
  acquisitionKey,
  epochMillis,
  paperclipError,
  paperclipLease,
  storedLease,
  witLease,
} from "./mapping.js";
import { ServeClient, ServeError } from "./serve-client.js";

let context: PluginContext | undefined;
const hosts = new Hosts();
/**
 * The generation of the next acquire of a run (by acquisition key), raised when the run's lease
 * expired or was released or destroyed: a fresh acquire then gets a new sandbox, never the dead
 * one. A retried acquire of a live lease keeps the generation and adopts.
 */
const generations = new Map<string, number>();

/** The operator's instance config for a company (none before `setup`, as in a bare harness). */
async function instanceConfig(companyId?: string): Promise<Record<string, unknown>> {
  return context ? context.config.get(companyId) : {};
}

/** An environment config split, and the serve process for it; every problem refuses the call. */
async function prepare(config: unknown, companyId?: string): Promise<{ env: EnvironmentConfig; host: ServeClient }> {
  const env = splitEnvironmentConfig(config);
  const { settings, problems } = hostSettings(await instanceConfig(companyId), env.kubeconfig);
  const all = [...env.problems, ...problems];
  if (all.length > 0) {
    throw new ServeError("plugin", "invalid-config", all.map(problemText).join("; "), false, all[0]?.path);
  }
  return { env, host: await hosts.get(settings) };
}

/** Forgets a lease's acquisition: the next acquire of its run makes a new sandbox. */
function retire(stored: StoredLease | undefined): void {
  if (!stored) return;
  const { key, generation } = stored.acquisition;
  generations.set(key, Math.max(generations.get(key) ?? 0, generation + 1));
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
  async setup(ctx) {
    context = ctx;
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
      const host = await hosts.get(settings);
      validation = (await host.call("validate-config", { config: env.provider })) as typeof validation;
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
    let prepared;
    try {
      prepared = await prepare(params.config, params.companyId);
    } catch (e) {
      const message = paperclipError(e).message;
      return { ok: false, summary: message, diagnostics: [{ severity: "error", code: "host-unavailable", message }] };
    }
    const probe = (await guarded(() => prepared.host.call("probe", { config: prepared.env.provider }))) as {
      ok: boolean;
      summary: string;
      diagnostics: { severity: "info" | "warning" | "error"; code: string; message: string }[];
    };
    return { ok: probe.ok, summary: probe.summary, diagnostics: probe.diagnostics };
  },

  async onEnvironmentAcquireLease(params: PluginEnvironmentAcquireLeaseParams): Promise<PluginEnvironmentLease> {
    return guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId);
      const key = acquisitionKey(params.environmentId, params.runId);
      const generation = generations.get(key) ?? 0;
      const request = {
        config: env.provider,
        "run-id": params.runId,
        "acquisition-id": acquisitionId(key, generation),
        "agent-id": params.agentId ?? null,
        "requested-expires-at": params.requestedExpiresAt ? epochMillis(params.requestedExpiresAt, "requestedExpiresAt") : null,
        env: Object.entries(env.secretEnv).map(([name, value]) => ({ name, value, secret: true })),
        reusable: env.reusable,
      };
      const lease = (await host.call("acquire", request)) as WitLease;
      context?.logger.info("sandbox acquired", { providerLeaseId: lease["provider-lease-id"], runId: params.runId });
      if (env.reusable && lease.reusable !== true) {
        context?.logger.warn("reuseLease is set but the lease is ephemeral: reuse needs backend sandbox with sandbox.workspaceVolume", {
          providerLeaseId: lease["provider-lease-id"],
        });
      }
      return paperclipLease(lease, { key, generation }, env.provider);
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
      retire(stored);
      // What Paperclip takes for "cannot resume": it destroys this lease and acquires anew.
      return { providerLeaseId: null, metadata: { expired: true, reason: outcome.expired } };
    });
  },

  async onEnvironmentReleaseLease(params: PluginEnvironmentReleaseLeaseParams): Promise<void> {
    const providerLeaseId = params.providerLeaseId;
    if (!providerLeaseId) return;
    await guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId);
      const lease = witLease(providerLeaseId, params.leaseMetadata, env.provider);
      await host.call("release", { lease, config: env.provider });
      if (lease.reusable !== true) retire(storedLease(params.leaseMetadata));
    });
  },

  async onEnvironmentDestroyLease(params: PluginEnvironmentDestroyLeaseParams): Promise<void> {
    const providerLeaseId = params.providerLeaseId;
    if (!providerLeaseId) return;
    await guarded(async () => {
      const { env, host } = await prepare(params.config, params.companyId);
      const lease = witLease(providerLeaseId, params.leaseMetadata, env.provider);
      const report = (await host.call("destroy", { lease, config: env.provider })) as {
        objects: { kind: string; name: string; outcome: string | { failed: string } }[];
      };
      retire(storedLease(params.leaseMetadata));
      const failed = report.objects.filter((o) => typeof o.outcome === "object");
      if (failed.length > 0) {
        const what = failed.map((o) => `${o.kind} ${o.name}: ${(o.outcome as { failed: string }).failed}`).join("; ");
        throw new ServeError("provider", "destroy-incomplete", `destroy left objects behind (${what}); destroy again`, true);
      }
    });
  },
});

export default plugin;
