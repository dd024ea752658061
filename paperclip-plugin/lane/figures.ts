// The lane's figures, for BENCHMARKS.md: printed and written to `figures.json`, never asserted
// (machines here are shared and noisy). `make bench` puts the last run's in its report.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import type { PaperclipServer } from "./server.js";
import { quantile, waitFor } from "./support.js";

/** Figures of each successful agent run, for BENCHMARKS.md (printed, never asserted). */
export interface RunFigures {
  label: string;
  runId: string;
  provider: string;
  backend: string;
  leaseOutcome: string | null;
  /** Run start (the run's startedAt) to lease acquired (the lease's acquiredAt). */
  runStartToLeaseMs: number | null;
  /** `pods/exec` requests the cluster answered between the wakeup and the run's end. */
  execs: number;
  /** Their latency to the WebSocket upgrade (the cluster's request log has no exec end). */
  execUpgradeP50Ms: number | null;
  execUpgradeP99Ms: number | null;
  /** The run's provider leases and start, to find its commands in the plugin's logs. */
  providerLeaseIds: string[];
  startedAt: string;
  finishedAt: string;
  /** environmentExecute calls of the run and their durations, from the plugin's command metric. */
  executes: number;
  executeP50Ms: number | null;
  executeP99Ms: number | null;
  /** The lease's releasedAt minus the run's finishedAt. */
  releaseAfterRunMs: number | null;
  /** Run start to the run's `adapter.invoke` event: lease, workspace and runtime set up. */
  runStartToAdapterMs: number | null;
  /** The `adapter.invoke` event to the run's end: the agent CLI in the sandbox. */
  adapterToRunEndMs: number | null;
  /** The run's startedAt to finishedAt. */
  runMs: number | null;
}

/** The metric the plugin writes for each command, as its README documents it. */
const COMMAND_METRIC = "sandbox.command.duration_ms";

const round = (v: number | undefined | null) => (v === undefined || v === null ? null : Math.round(v * 10) / 10);

/**
 * Each run's commands and their durations, from the plugin's command metric (tagged with the
 * lease and when the command started). Paperclip writes a plugin's metrics with its logs, in
 * batches every few seconds: read until two reads a flush apart agree.
 */
export async function commandDurations(server: PaperclipServer, pluginId: string, figures: RunFigures[]): Promise<void> {
  const since = figures.map((f) => f.startedAt).sort()[0];
  if (since === undefined) return;
  let rows: any[] = [];
  let previous = -1;
  await waitFor(
    `the plugin's ${COMMAND_METRIC} metrics to be written`,
    async () => {
      const logs = await server.api("GET", `/plugins/${pluginId}/logs?limit=500&level=metric&since=${encodeURIComponent(since)}`);
      rows = ((Array.isArray(logs.json) ? logs.json : []) as any[]).filter((row) => row.message === COMMAND_METRIC);
      const settled = rows.length > 0 && rows.length === previous;
      previous = rows.length;
      return settled ? true : undefined;
    },
    { deadlineMs: 60_000, intervalMs: 6_000, describe: () => `${rows.length} lines so far` },
  );
  for (const f of figures) {
    const ms = rows
      .filter((row) => f.providerLeaseIds.includes(row.meta?.tags?.providerLeaseId))
      .filter((row) => {
        const at = row.meta?.tags?.startedAt;
        return typeof at === "string" && at >= f.startedAt && at <= f.finishedAt;
      })
      .map((row) => Number(row.meta?.value))
      .filter((v) => Number.isFinite(v));
    f.executes = ms.length;
    f.executeP50Ms = round(quantile(ms, 0.5));
    f.executeP99Ms = round(quantile(ms, 0.99));
  }
}

/** One run's figures on a line. */
export function describeFigures(f: RunFigures): string {
  return (
    `${f.label}: ${f.provider}/${f.backend} lease ${f.leaseOutcome ?? "?"}; run start -> lease acquired ${f.runStartToLeaseMs} ms; ` +
    `set up (run start -> adapter invoked) ${f.runStartToAdapterMs} ms, agent ${f.adapterToRunEndMs} ms, run ${f.runMs} ms; ` +
    `${f.executes} executes, p50 ${f.executeP50Ms} ms p99 ${f.executeP99Ms} ms; ${f.execs} pods/exec, upgrade p50 ${f.execUpgradeP50Ms} ms p99 ${f.execUpgradeP99Ms} ms; ` +
    `released ${f.releaseAfterRunMs ?? "- (resumed by the next run)"} ms after the run's end`
  );
}

/** Writes `figures.json` under `dir` (what `make bench` reads); its path. */
export function writeFigures(
  dir: string,
  figures: { paperclip: string; laneWallMs: number; runs: RunFigures[]; recorded: Record<string, string> },
): string {
  const path = join(dir, "figures.json");
  mkdirSync(dir, { recursive: true });
  const notes = [
    "run start -> lease: the run's startedAt to its lease's acquiredAt; run start -> agent: to the run's adapter.invoke event",
    "released after run: the lease's releasedAt minus the run's finishedAt; none for a reusable lease the next run resumed (its row is retired then)",
    "execs (in figures.json): the pods/exec requests the embedded cluster answered during the run, more than the executes (realize, retries); execUpgrade*: their latency to the WebSocket upgrade",
  ];
  const measuredAt = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const { paperclip, ...rest } = figures;
  writeFileSync(path, `${JSON.stringify({ paperclip, measuredAt, notes, ...rest }, null, 2)}\n`);
  return path;
}
