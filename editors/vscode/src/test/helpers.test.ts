/**
 * Unit tests of the extension's pure helpers, run with node's built-in test runner
 * (`npm test`). Real VS Code is not needed (and cannot be downloaded in CI).
 */

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import * as h from "../helpers";

const PACKAGE_JSON = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
const PLACES: h.Places = { home: "/home/u", workspace: "/work/proj", platform: "linux" };

/** A ConfigReader over the package.json defaults, with some values overridden. */
function config(overrides: Record<string, unknown> = {}): h.ConfigReader {
  const props = PACKAGE_JSON.contributes.configuration.properties as Record<string, { default: unknown }>;
  return {
    get<T>(key: string): T | undefined {
      if (key in overrides) {
        return overrides[key] as T;
      }
      return props[`${h.SECTION}.${key}`]?.default as T | undefined;
    },
  };
}

test("settingKeys lists the contributed vqLsp settings", () => {
  const keys = h.settingKeys(PACKAGE_JSON);
  assert.ok(keys.includes("modelPath"));
  assert.ok(keys.includes("diagnostics.sentimentThreshold"));
  for (const k of h.CLIENT_ONLY) {
    assert.ok(keys.includes(k), `client-only setting ${k} is contributed`);
  }
  assert.throws(() => h.settingKeys({}), /no configuration/);
});

test("serverSettings nests, drops client-only settings and maps empty strings to null", () => {
  const s = h.serverSettings(h.settingKeys(PACKAGE_JSON), config(), PLACES);
  for (const k of h.CLIENT_ONLY) {
    assert.equal(k.split(".")[0] in s, false, `${k} must not reach the server`);
  }
  assert.equal(s.modelPath, null);
  assert.equal(s.device, null);
  assert.equal(s.threads, 1);
  assert.deepEqual(s.diagnostics, {
    sentiment: true,
    sentimentThreshold: 0.7,
    surprise: false,
    surpriseThreshold: 14,
    maxSurpriseHints: 50,
    typo: true,
    typoThreshold: 1.76,
    realWordThreshold: 3.25,
    maxTypoHints: 50,
    toneMinWords: 12,
    toneShortThreshold: 0.95,
    toneGate: 0.62,
    sourceComments: true,
    grammar: true,
    sentimentSeverity: "information",
    typoSeverity: "warning",
    surpriseSeverity: "hint",
    grammarSeverity: "hint",
  });
  assert.deepEqual(s.exclude, []);
  assert.ok(Array.isArray(s.fileTypes) && (s.fileTypes as string[]).includes("markdown"));
  assert.equal("diagnostics.sentiment" in s, false);
});

test("serverSettings resolves the model path and passes set values through", () => {
  const keys = h.settingKeys(PACKAGE_JSON);
  const rel = h.serverSettings(keys, config({ modelPath: "models/tiny", device: "cuda:1",
    "diagnostics.surpriseThreshold": 3.5 }), PLACES);
  assert.equal(rel.modelPath, "/work/proj/models/tiny");
  assert.equal(rel.device, "cuda:1");
  assert.equal((rel.diagnostics as Record<string, unknown>).surpriseThreshold, 3.5);
  assert.equal(h.serverSettings(keys, config({ modelPath: "~/m" }), PLACES).modelPath, "/home/u/m");
  assert.equal(h.serverSettings(keys, config({ modelPath: " /abs/m " }), PLACES).modelPath, "/abs/m");
  assert.equal(h.serverSettings(keys, config({ modelPath: "m" }), { home: "/h" }).modelPath, "m");
  // a bare name: the workspace folder of that name when there is one, else the installed model's name
  const noFolder = { ...PLACES, exists: () => false };
  assert.equal(h.serverSettings(keys, config({ modelPath: "my-model_2" }), noFolder).modelPath, "my-model_2");
  assert.equal(h.serverSettings(keys, config({ modelPath: "models/tiny" }), noFolder).modelPath, "/work/proj/models/tiny");
  const folder = { ...PLACES, exists: (p: string) => p === "/work/proj/my-model_2" };
  assert.equal(h.serverSettings(keys, config({ modelPath: "my-model_2" }), folder).modelPath, "/work/proj/my-model_2");
  // a setting without a value is left to the server's default
  const partial = h.serverSettings(["threads", "hover"], { get: <T>(k: string) => (k === "hover" ? false : undefined) as T },
    PLACES);
  assert.deepEqual(partial, { hover: false });
});

test("needsRestart only for settings that shape the process or the selector", () => {
  assert.equal(h.needsRestart((k) => k === "vqLsp.serverPath"), true);
  assert.equal(h.needsRestart((k) => k === "vqLsp.fileTypes"), true);
  assert.equal(h.needsRestart((k) => k === "vqLsp.modelPath"), false);
  assert.equal(h.needsRestart(() => false), false);
});

test("findOnPath searches PATH in order, with Windows extensions", () => {
  const files = new Set(["/b/vq-lsp", "/c/vq-lsp", "C:\\py\\Scripts\\vq-lsp.exe"]);
  const isFile = (p: string) => files.has(p);
  assert.equal(h.findOnPath("vq-lsp", "/a::/b:/c", "linux", isFile), "/b/vq-lsp");
  assert.equal(h.findOnPath("vq-lsp", "/a", "linux", isFile), undefined);
  assert.equal(h.findOnPath("vq-lsp", undefined, "linux", isFile), undefined);
  assert.equal(h.findOnPath("vq-lsp", "C:\\x;C:\\py\\Scripts", "win32", isFile), "C:\\py\\Scripts\\vq-lsp.exe");
});

test("resolveServer prefers vqLsp.serverPath and explains what is missing", () => {
  const files = new Set(["/home/u/venv/bin/vq-lsp", "/usr/bin/vq-lsp"]);
  const isFile = (p: string) => files.has(p);
  assert.deepEqual(h.resolveServer("~/venv/bin/vq-lsp", ["--log-level", "INFO"], "/usr/bin", PLACES, isFile),
    { command: "/home/u/venv/bin/vq-lsp", args: ["--log-level", "INFO"] });
  assert.deepEqual(h.resolveServer("", undefined, "/usr/bin", PLACES, isFile), { command: "/usr/bin/vq-lsp", args: [] });
  const missing = h.resolveServer("/nope/vq-lsp", [], "/usr/bin", PLACES, isFile);
  assert.ok("error" in missing && /serverPath/.test(missing.error) && /not a file/.test(missing.error));
  const notOnPath = h.resolveServer(undefined, [], "/a", PLACES, isFile);
  assert.ok("error" in notOnPath && /not on PATH/.test(notOnPath.error));
});

test("documentSelector covers file and untitled documents of the wanted types", () => {
  assert.deepEqual(h.documentSelector(["markdown"]), [
    { scheme: "file", language: "markdown" },
    { scheme: "untitled", language: "markdown" },
  ]);
  assert.deepEqual(h.documentSelector(["markdown", "*"]), [{ scheme: "file" }, { scheme: "untitled" }]);
  assert.deepEqual(h.documentSelector(undefined), []);
});

const SCORES: h.DocumentScores = {
  uri: "file:///tmp/a.md",
  version: 3,
  scores: { negative: 0.2, positive: 0.8 },
  tokens: 42,
  windows: 1,
  paragraphs: [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 10 } }, tokens: [0, 42],
    scores: { negative: 0.2, positive: 0.8 } }],
  cost: {
    incremental_macs: 1_500_000, dense_macs: 30_000_000, speedup: 20, dirty_per_layer: [1, 3, 2, 2],
    relabelled: 0, full_respreads: 0, near_ties: 1, seconds: 0.0123, splices: 1,
  },
  updates: 5,
  rebuilds: 0,
  evictions: 0,
  memory: { bytes: 3 * 2 ** 20, budget_bytes: 1024 * 2 ** 20, live_states: 1, open_documents: 1 },
};

test("status bar text and tooltip show the top label", () => {
  assert.deepEqual(h.topLabel(SCORES.scores), ["positive", 0.8]);
  assert.equal(h.topLabel({}), undefined);
  assert.equal(h.statusText(SCORES), "$(pulse) positive 0.80");
  assert.equal(h.statusText({ ...SCORES, scores: {} }), "$(pulse) vq-lsp");
  const tip = h.statusTooltip(SCORES);
  assert.match(tip, /negative 0\.200, positive 0\.800/);
  assert.match(tip, /42 tokens, 1 paragraphs, version 3/);
});

test("cost statistics: incremental update, full pass, nothing yet", () => {
  assert.equal(h.humanCount(999), "999");
  assert.equal(h.humanCount(1_500_000), "1.50M");
  assert.equal(h.costSummary(SCORES), "1.50M MACs incremental vs 30.00M dense (20.0x fewer), 12.3 ms");
  const pastedOver = { ...SCORES, cost: { ...SCORES.cost, incremental_macs: 33_000_000, speedup: 30 / 33 } };
  assert.equal(h.costSummary(pastedOver), "33.00M MACs incremental vs 30.00M dense (1.1x more), 12.3 ms");
  const text = h.formatCost(SCORES);
  assert.match(text, /dirty positions per layer: 1, 3, 2, 2/);
  assert.match(text, /token splices: 1/);
  assert.match(text, /near-tie rows recomputed: 1/);
  assert.match(text, /engine memory: 3\.0 MiB of 1024\.0 MiB/);
  const rebuilt = { ...SCORES, cost: { rebuild_seconds: 0.5, tokens: 42 } };
  assert.equal(h.costSummary(rebuilt), "full pass over 42 tokens in 500.0 ms (no incremental update since)");
  assert.doesNotMatch(h.formatCost(rebuilt), /dirty positions/);
  assert.equal(h.costSummary({ ...SCORES, cost: null }), "no update yet");
});

test("cost statistics after a restore from the snapshot cache, and of an unknown shape, read as words", () => {
  const restored = { ...SCORES, cost: { restore_seconds: 0.1199, tokens: 1712 }, updates: 0, restores: 1 };
  assert.equal(h.costSummary(restored),
    "restored from a snapshot: 1712 tokens in 119.9 ms (no incremental update since)");
  const text = h.formatCost(restored);
  assert.match(text, /last update: restored from a snapshot: 1712 tokens in 119\.9 ms/);
  assert.match(text, /updates: 0, rebuilds: 0, restores: 1, evictions: 0/);
  assert.doesNotMatch(text, /[{}"]/);
  const other = { ...SCORES, cost: { merged_seconds: 0.123456, windows: [1, 2], parts: { a: 1 } } };
  assert.equal(h.costSummary(other), "merged seconds 0.1235, parts a 1, windows 1/2");
  assert.match(h.formatCost({ ...SCORES, restores: undefined }), /restores: 0,/);
});

/** VS Code's configuration as the extension reads it: a user layer over the package.json defaults. */
class UserSettings implements h.ConfigReader {
  readonly user = new Map<string, unknown>();
  get<T>(key: string): T | undefined {
    return (this.user.has(key) ? this.user.get(key) : config().get<T>(key)) as T | undefined;
  }
}

test("a setting the user removes is sent with its default, never left over; unknown keys are never sent", () => {
  const keys = h.settingKeys(PACKAGE_JSON);
  const cfg = new UserSettings();
  cfg.user.set("diagnostics.toneMinWords", 5);
  cfg.user.set("diagnostics.tonMinWords", 5); // a mistyped key in settings.json
  const set = h.serverSettings(keys, cfg, PLACES);
  assert.equal((set.diagnostics as Record<string, unknown>).toneMinWords, 5);
  assert.equal("tonMinWords" in (set.diagnostics as Record<string, unknown>), false);
  cfg.user.delete("diagnostics.toneMinWords");
  const removed = h.serverSettings(keys, cfg, PLACES);
  assert.equal((removed.diagnostics as Record<string, unknown>).toneMinWords, 12);
  assert.deepEqual(removed, h.serverSettings(keys, config(), PLACES)); // the whole set, as with no user settings
});

test("code lenses are asked for again when a shown document's diagnostics change", () => {
  assert.equal(h.lensRefreshNeeded(["file:///a.md"], ["file:///b.md", "file:///a.md"]), true);
  assert.equal(h.lensRefreshNeeded(["file:///c.md"], ["file:///a.md"]), false);
  assert.equal(h.lensRefreshNeeded([], ["file:///a.md"]), false);
});

test("verify results read as passed or rebuilt", () => {
  const res: h.VerifyResult = { uri: "file:///a.md", version: 2, codesEqual: true, maxAbsDiff: 0, mismatchedCodes: 0,
    tokensMatchText: true, seconds: 0.004, rebuilt: false };
  assert.deepEqual(h.formatVerify(res),
    { ok: true, text: "vq-lsp verify: the incremental state equals a full pass (max |diff| 0.00e+0, 0 mismatched codes, 4.0 ms)." });
  const bad = h.formatVerify({ ...res, codesEqual: false, mismatchedCodes: 2, rebuilt: true });
  assert.equal(bad.ok, false);
  assert.match(bad.text, /codes differ from a full pass .*2 mismatched codes.*rebuilt/);
  assert.match(h.formatVerify({ ...res, tokensMatchText: false, rebuilt: true }).text, /tokens disagree/);
});
