// A stand-in for the Paperclip server's side of a plugin worker: it starts the built worker
// (`node dist/src/worker.js`), speaks JSON-RPC 2.0 on its stdio, one message per line, and
// answers the worker's own requests. As the real server does, it answers `config.get` only for
// the company of a call in flight (Paperclip keeps plugin config per company, and refuses a
// request without one: `environmentValidateConfig` names none); the lane in `lane/` drives the
// real server.
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import manifest from "../src/manifest.js";

const WORKER = join(dirname(fileURLToPath(import.meta.url)), "..", "src", "worker.js");

/** One JSON-RPC message as the worker writes it. */
export type Message = { jsonrpc: "2.0"; id?: number | string | null; method?: string; params?: any; result?: any; error?: any };

export class PaperclipServer {
  private readonly worker: ChildProcessByStdio<Writable, Readable, null>;
  private readonly waiting = new Map<number | string, (m: Message) => void>();
  /** The plugin's state, as the server keeps it (`state.get`, `state.set`). */
  readonly state = new Map<string, unknown>();
  private next = 1;
  /** Notifications the worker sent (`log`, ...). */
  readonly notifications: Message[] = [];
  /** The metrics the worker wrote (`metrics.write`). */
  readonly metrics: { name: string; value: number; tags?: Record<string, string> }[] = [];
  /** Methods the worker asked the server, in order. */
  readonly asked: string[] = [];
  /** The companies of the calls in flight: the only ones `config.get` answers for. */
  private readonly scopes = new Map<number, string>();
  readonly exited: Promise<number | null>;

  constructor(private readonly instanceConfig: Record<string, unknown>) {
    this.worker = spawn(process.execPath, [WORKER], { stdio: ["pipe", "pipe", "inherit"] });
    this.exited = new Promise((r) => this.worker.once("exit", (code) => r(code)));
    createInterface({ input: this.worker.stdout }).on("line", (line) => this.receive(JSON.parse(line) as Message));
  }

  /** `initialize` with the plugin's manifest: the methods the worker supports. */
  async initialize(): Promise<string[]> {
    const init = await this.call("initialize", {
      manifest,
      config: this.instanceConfig,
      instanceInfo: { instanceId: "00000000-0000-0000-0000-000000000001", hostVersion: "2026.916.1" },
      apiVersion: 1,
    });
    return init.result?.supportedMethods ?? [];
  }

  /** Ends the worker at once (a test that failed half-way must not leave it running). */
  kill(): void {
    this.worker.kill("SIGKILL");
  }

  /** One request; resolves with the worker's whole reply. */
  call(method: string, params: unknown): Promise<Message> {
    return new Promise((resolve) => {
      const id = this.next++;
      const company = (params as { companyId?: unknown } | null)?.companyId;
      if (typeof company === "string") this.scopes.set(id, company);
      this.waiting.set(id, (m) => {
        this.scopes.delete(id);
        resolve(m);
      });
      this.send({ jsonrpc: "2.0", id, method, params });
    });
  }

  private send(m: Message): void {
    this.worker.stdin.write(`${JSON.stringify(m)}\n`);
  }

  private receive(m: Message): void {
    if (m.method && m.id !== undefined && m.id !== null) {
      this.asked.push(m.method);
      const key = JSON.stringify([m.params?.scopeKind, m.params?.scopeId, m.params?.namespace, m.params?.stateKey]);
      if (m.method === "config.get") {
        const company = m.params?.companyId;
        if (typeof company === "string" && [...this.scopes.values()].includes(company)) {
          this.send({ jsonrpc: "2.0", id: m.id, result: this.instanceConfig });
        } else {
          const message = `Plugin "${manifest.id}" is not allowed to perform "config.get": company context is required`;
          this.send({ jsonrpc: "2.0", id: m.id, error: { code: -32005, message } });
        }
      }
      else if (m.method === "metrics.write") {
        this.metrics.push(m.params);
        this.send({ jsonrpc: "2.0", id: m.id, result: null });
      } else if (m.method === "state.get") this.send({ jsonrpc: "2.0", id: m.id, result: this.state.get(key) ?? null });
      else if (m.method === "state.set") {
        this.state.set(key, m.params?.value);
        this.send({ jsonrpc: "2.0", id: m.id, result: null });
      } else this.send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: `Unknown method: ${m.method}` } });
    } else if (m.method) {
      this.notifications.push(m);
    } else if (m.id !== undefined && m.id !== null) {
      this.waiting.get(m.id)?.(m);
      this.waiting.delete(m.id);
    }
  }
}
