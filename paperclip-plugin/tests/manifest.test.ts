// The manifest passes the validator the Paperclip server uses on install.
import assert from "node:assert/strict";
import { test } from "node:test";

import { pluginManifestV1Schema } from "@paperclipai/shared";

import manifest, { DRIVER_KEY } from "../src/manifest.js";

test("the manifest is a valid PaperclipPluginManifestV1 with one sandbox_provider driver", () => {
  const parsed = pluginManifestV1Schema.safeParse(manifest);
  assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
  const drivers = manifest.environmentDrivers ?? [];
  assert.deepEqual(drivers.map((d) => [d.driverKey, d.kind]), [[DRIVER_KEY, "sandbox_provider"]]);
});
