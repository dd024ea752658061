// The `sandbox-host serve` processes of a worker: one per set of host settings (binary,
// component, policy, kubeconfig), started on first use. A process idle for ten minutes is
// ended (an edited or rotated kubeconfig would otherwise leave one behind for good), and at
// most `MAX_PROCESSES` are kept: the longest idle goes first.
import { type HostSettings, settingsKey } from "./config.js";
import { ServeClient } from "./serve-client.js";

const IDLE_MS = 10 * 60_000;
const MAX_PROCESSES = 32;
const SWEEP_MS = 60_000;

export class Hosts {
  private readonly clients = new Map<string, ServeClient>();
  private sweeper?: NodeJS.Timeout;

  /** The serve process for `settings`. */
  get(settings: HostSettings): ServeClient {
    const key = settingsKey(settings);
    let client = this.clients.get(key);
    if (!client) {
      this.makeRoom();
      client = new ServeClient(settings);
      this.clients.set(key, client);
      if (!this.sweeper) {
        this.sweeper = setInterval(() => this.sweep(IDLE_MS), SWEEP_MS);
        this.sweeper.unref();
      }
    }
    return client;
  }

  /** Each process's purpose, pid and how often it was started, for health checks. */
  processes(): { purpose: HostSettings["purpose"]; pid: number | null; starts: number }[] {
    return [...this.clients.values()].map((c) => ({ purpose: c.purpose, pid: c.pid() ?? null, starts: c.starts }));
  }

  /** Ends the processes idle for at least `idleMs`. */
  sweep(idleMs: number): void {
    for (const [key, client] of [...this.clients]) {
      if (client.idleMillis() >= idleMs) {
        this.clients.delete(key);
        void client.close();
      }
    }
  }

  /** Ends every process (end of input: their calls in flight finish). */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    const clients = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(clients.map((c) => c.close()));
  }

  private makeRoom(): void {
    if (this.clients.size < MAX_PROCESSES) return;
    const idle = [...this.clients].filter(([, c]) => c.idleMillis() > 0).sort(([, a], [, b]) => b.idleMillis() - a.idleMillis());
    const [key, client] = idle[0] ?? [];
    if (key !== undefined && client) {
      this.clients.delete(key);
      void client.close();
    }
  }
}
