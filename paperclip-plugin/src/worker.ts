// The worker entry point Paperclip runs (`node dist/src/worker.js`): the plugin over stdio.
import { runWorker } from "@paperclipai/plugin-sdk";
import plugin from "./plugin.js";

export default plugin;
runWorker(plugin, import.meta.url);
