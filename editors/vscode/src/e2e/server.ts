/**
 * The extension's half of a session with the real `vq-lsp`, without VS Code (which cannot run
 * in CI): the settings are mapped by `serverSettings` from the package.json defaults exactly as
 * the extension maps them, sent as initializationOptions and through
 * workspace/didChangeConfiguration, and the server's answers go through the same formatting as
 * the status bar, the cost command and the verify code lens. tests/editors/test_vscode_client.py
 * runs it and asserts on the JSON it writes.
 *
 * Usage: node out/e2e/server.js VQ_LSP MODEL_DIR OUT_JSON
 */

import * as cp from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as rpc from "vscode-jsonrpc/node";

import * as h from "../helpers";

const WAIT_MS = 60_000;
const [server, model, outFile] = process.argv.slice(2);
const PACKAGE_JSON = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
const PROPS = PACKAGE_JSON.contributes.configuration.properties as Record<string, { default: unknown }>;

/** The extension's configuration: package.json defaults with user overrides. */
function config(overrides: Record<string, unknown>): h.ConfigReader {
  return {
    get<T>(key: string): T | undefined {
      return (key in overrides ? overrides[key] : PROPS[`${h.SECTION}.${key}`]?.default) as T | undefined;
    },
  };
}

interface Diagnostic {
  severity?: number;
  code?: string;
  message: string;
}

async function main(): Promise<Record<string, unknown>> {
  const keys = h.settingKeys(PACKAGE_JSON);
  const places: h.Places = { home: process.env.HOME ?? "/", workspace: path.dirname(outFile) };
  const user: Record<string, unknown> = {
    modelPath: model, device: "cpu", "diagnostics.sentimentThreshold": 0, "diagnostics.surpriseThreshold": 0,
    "diagnostics.maxSurpriseHints": 2, "diagnostics.surprise": true, "diagnostics.typo": false, "diagnostics.toneMinWords": 0,
  };
  const proc = cp.spawn(server, [], { stdio: ["pipe", "pipe", "inherit"] });
  const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(proc.stdout!),
    new rpc.StreamMessageWriter(proc.stdin!));
  const messages: { type: number; message: string }[] = [];
  const published = new Map<number | undefined, Diagnostic[]>();
  let progressEnded = false;
  const waiters: (() => void)[] = [];
  const poke = () => waiters.splice(0).forEach((w) => w());
  const waitFor = async (what: string, cond: () => boolean) => {
    const deadline = Date.now() + WAIT_MS;
    while (!cond()) {
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${what}`);
      }
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  };
  conn.onNotification("window/showMessage", (p: { type: number; message: string }) => { messages.push(p); poke(); });
  conn.onNotification("window/logMessage", () => undefined);
  conn.onNotification("$/progress", (p: { value: { kind: string } }) => {
    progressEnded ||= p.value.kind === "end";
    poke();
  });
  conn.onNotification("textDocument/publishDiagnostics", (p: { version?: number; diagnostics: Diagnostic[] }) => {
    published.set(p.version, p.diagnostics);
    poke();
  });
  conn.onRequest("window/workDoneProgress/create", () => null);
  conn.onRequest("workspace/configuration", () => [h.serverSettings(keys, config(user), places)]);
  conn.listen();

  const out: Record<string, unknown> = {};
  try {
    const uri = `file://${path.join(path.dirname(outFile), "notes.md")}`;
    await conn.sendRequest("initialize", {
      processId: process.pid, rootUri: null, workspaceFolders: null,
      capabilities: { window: { workDoneProgress: true }, workspace: { configuration: true } },
      initializationOptions: h.serverSettings(keys, config(user), places),
    });
    await conn.sendNotification("initialized", {});
    await waitFor("the model to load", () => progressEnded);
    const first = "The film was a delight from start to finish.";
    await conn.sendNotification("textDocument/didOpen", {
      textDocument: { uri, languageId: "markdown", version: 1, text: first + "\n" },
    });
    await waitFor("diagnostics of version 1", () => published.has(1));
    await conn.sendNotification("textDocument/didChange", {
      textDocument: { uri, version: 2 },
      contentChanges: [{ range: { start: { line: 1, character: 0 }, end: { line: 1, character: 0 } },
        text: "\nI hated the ending, though it was short.\n" }],
    });
    await waitFor("diagnostics of version 2", () => published.has(2));
    out.diagnostics = published.get(2);
    const scores = await conn.sendRequest<h.DocumentScores>(h.DOCUMENT_SCORES, { uri });
    out.scores = scores;
    out.statusText = h.statusText(scores);
    out.statusTooltip = h.statusTooltip(scores);
    out.costSummary = h.costSummary(scores);
    out.formatCost = h.formatCost(scores);
    out.verify = h.formatVerify(await conn.sendRequest<h.VerifyResult>("workspace/executeCommand",
      { command: h.VERIFY, arguments: [uri] }));
    // A settings change, as onConfigurationChanged sends it.
    user["diagnostics.surprise"] = false;
    await conn.sendNotification("workspace/didChangeConfiguration",
      { settings: { [h.SECTION]: h.serverSettings(keys, config(user), places) } });
    await waitFor("diagnostics without surprise hints", () => {
      const d = published.get(2);
      return d !== undefined && d.length > 0 && d.every((x) => x.code !== "surprise");
    });
    out.afterSettings = published.get(2);
    // The code lens, as VS Code asks for it.
    out.codeLens = await conn.sendRequest("textDocument/codeLens", { textDocument: { uri } });
    // Close the document (its state goes to the snapshot cache) and open it again: the state is
    // restored, and the status bar and the cost command read that answer.
    await conn.sendNotification("textDocument/didClose", { textDocument: { uri } });
    const cache = process.env.VQ_LSP_CACHE_DIR;
    if (cache) {
      const snapshots = path.join(cache, "snapshots");
      await waitFor("a snapshot in the cache", () => fs.existsSync(snapshots) && fs.readdirSync(snapshots).length > 0);
    }
    const second = "I hated the ending, though it was short.";
    await conn.sendNotification("textDocument/didOpen", {
      textDocument: { uri, languageId: "markdown", version: 3, text: `${first}\n\n${second}\n` },
    });
    await waitFor("diagnostics of version 3", () => published.has(3));
    const restored = await conn.sendRequest<h.DocumentScores>(h.DOCUMENT_SCORES, { uri });
    out.restoredScores = restored;
    out.restoredStatusTooltip = h.statusTooltip(restored);
    out.restoredFormatCost = h.formatCost(restored);
    await conn.sendRequest("shutdown");
    await conn.sendNotification("exit");
  } catch (e) {
    out.error = e instanceof Error ? e.message : String(e);
  } finally {
    out.messages = messages;
    conn.dispose();
    proc.kill();
  }
  return out;
}

main().then((out) => {
  fs.writeFileSync(outFile, JSON.stringify(out, null, 1));
  process.exit(out.error ? 1 : 0);
}, (e) => {
  console.error(e);
  process.exit(2);
});
