// The `sandbox-host serve` processes of a worker: one per set of host settings (binary,
// component, policy, kubeconfig), started on first use and checked with `hello`.
import { type HostSettings, settingsKey } from "./config.js";
import { PROTOCOL_VERSION, ServeClient, ServeError } from "./serve-client.js";

export class Hosts {
  private readonly clients = new Map<string, Promise<ServeClient>>();
  private readonly greeted: ServeClient[] = [];

  /** The serve process for `settings`, started and greeted on first use. */
  get(settings: HostSettings): Promise<ServeClient> {
    const key = settingsKey(settings);
    let client = this.clients.get(key);
    if (!client) {
      client = this.greet(new ServeClient(settings));
      this.clients.set(key, client);
      // A host that cannot start is not kept: the next call tries again (the operator may have
      // fixed the path).
      client.catch(() => this.clients.delete(key));
    }
    return client;
  }

  /** Each process's pid and how often it was started, for health checks. */
  processes(): { pid: number | null; starts: number }[] {
    return this.greeted.map((c) => ({ pid: c.pid() ?? null, starts: c.starts }));
  }

  /** Ends every process (end of input: their calls in flight finish). */
  async close(): Promise<void> {
    const clients = await Promise.allSettled(this.clients.values());
    this.clients.clear();
    this.greeted.length = 0;
    await Promise.all(clients.map((c) => (c.status === "fulfilled" ? c.value.close() : undefined)));
  }

  /** Checks that the process speaks this protocol. */
  private async greet(client: ServeClient): Promise<ServeClient> {
    let hello: { protocol?: number };
    try {
      hello = (await client.call("hello")) as typeof hello;
    } catch (e) {
      await client.close(1000);
      throw e;
    }
    if (hello.protocol !== PROTOCOL_VERSION) {
      await client.close(1000);
      throw new ServeError(
        "plugin",
        "host-unavailable",
        `sandbox-host serve speaks protocol ${hello.protocol}, this plugin ${PROTOCOL_VERSION}; install matching versions`,
        false,
      );
    }
    this.greeted.push(client);
    return client;
  }
}
