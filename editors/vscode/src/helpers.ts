/**
 * Pure helpers of the extension: settings mapping, finding the server executable, the document
 * selector, and formatting the server's `vqLsp/documentScores` answer. Nothing here imports
 * `vscode`, so `node --test` can run the unit tests in `test/` without an editor.
 *
 * The server (`vq_lsp/settings.py`) owns the settings: their names, defaults and bounds. The
 * extension's package.json mirrors them under `vqLsp.` (tests/editors checks that it does) and
 * forwards every one except the few that only the extension reads (`CLIENT_ONLY`).
 */

import * as path from "node:path";

export const SECTION = "vqLsp";
export const DOCUMENT_SCORES = "vqLsp/documentScores";
/** The server's command behind the code lens: a full pass that checks the incremental state. */
export const VERIFY = "vqLsp.verify";

/** Settings only the extension reads; the server would warn about them as unknown. */
export const CLIENT_ONLY: readonly string[] = ["serverPath", "serverArgs", "statusBar", "trace.server"];
/** Settings that shape the command line or the document selector: a change restarts the server. */
export const RESTART_ON: readonly string[] = ["serverPath", "serverArgs", "fileTypes"];
/** String settings that name files: `~` and workspace-relative paths are resolved before sending. */
const PATH_SETTINGS: readonly string[] = ["modelPath"];

export interface ConfigReader {
  get<T>(key: string): T | undefined;
}

export interface Places {
  home: string;
  workspace?: string; // the first workspace folder, for relative paths
  platform?: NodeJS.Platform;
  exists?: (p: string) => boolean; // for a bare model name: a workspace folder of that name wins
}

/** A model installed with `vq-train export --install NAME` (the server's inference/paths.py rule). */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The setting keys (without the `vqLsp.` prefix) that a package.json contributes. */
export function settingKeys(packageJson: unknown): string[] {
  const props = (packageJson as { contributes?: { configuration?: { properties?: Record<string, unknown> } } })
    ?.contributes?.configuration?.properties;
  if (!props) {
    throw new Error("package.json contributes no configuration properties");
  }
  const prefix = SECTION + ".";
  return Object.keys(props).filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
}

/** `~` expanded, and a relative path resolved against the workspace folder when there is one. */
export function expandPath(p: string, places: Places): string {
  const pathlib = places.platform === "win32" ? path.win32 : path.posix;
  let out = p;
  if (out === "~") {
    out = places.home;
  } else if (out.startsWith("~/") || out.startsWith("~\\")) {
    out = pathlib.join(places.home, out.slice(2));
  }
  if (!pathlib.isAbsolute(out) && places.workspace) {
    out = pathlib.resolve(places.workspace, out);
  }
  return out;
}

/**
 * A path setting as the server should get it: expanded, except a bare name (`mymodel`) that is
 * not a folder in the workspace, which goes as it is, so the server finds the installed model
 * of that name (and, when there is none, says which ones are installed).
 */
function settingPath(value: string, places: Places): string {
  const expanded = expandPath(value, places);
  if (MODEL_NAME.test(value) && value !== "." && value !== ".." && places.exists && !places.exists(expanded)) {
    return value;
  }
  return expanded;
}

/**
 * The server's settings as the server reads them (camelCase, nested: `{diagnostics: {...}}`),
 * from the extension's configuration. An empty string means "unset" (the server's null: the
 * bundled model, the automatic device); a setting without a value is left out (server default).
 */
export function serverSettings(keys: readonly string[], cfg: ConfigReader, places: Places): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    if (CLIENT_ONLY.includes(key)) {
      continue;
    }
    let value = cfg.get<unknown>(key);
    if (value === undefined) {
      continue;
    }
    if (typeof value === "string") {
      value = value.trim() === "" ? null : PATH_SETTINGS.includes(key) ? settingPath(value.trim(), places) : value;
    }
    const parts = key.split(".");
    let node = out;
    for (const part of parts.slice(0, -1)) {
      if (typeof node[part] !== "object" || node[part] === null) {
        node[part] = {};
      }
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = value;
  }
  return out;
}

/** True when a change of these setting keys needs a new server process. */
export function needsRestart(changed: (key: string) => boolean): boolean {
  return RESTART_ON.some((k) => changed(`${SECTION}.${k}`));
}

/** The first `name` on `pathEnv` for which `isFile` holds (with Windows' executable extensions). */
export function findOnPath(
  name: string,
  pathEnv: string | undefined,
  platform: NodeJS.Platform,
  isFile: (p: string) => boolean,
): string | undefined {
  const win = platform === "win32";
  const pathlib = win ? path.win32 : path.posix;
  const names = win ? [`${name}.exe`, `${name}.cmd`, `${name}.bat`, name] : [name];
  for (const dir of (pathEnv ?? "").split(win ? ";" : ":")) {
    if (!dir) {
      continue;
    }
    for (const n of names) {
      const candidate = pathlib.join(dir, n);
      if (isFile(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

export type ServerCommand = { command: string; args: string[] } | { error: string };

/** The command that starts `vq-lsp`: `vqLsp.serverPath` when set, else `vq-lsp` on PATH. */
export function resolveServer(
  serverPath: string | undefined,
  serverArgs: readonly string[] | undefined,
  pathEnv: string | undefined,
  places: Places,
  isFile: (p: string) => boolean,
): ServerCommand {
  const args = [...(serverArgs ?? [])];
  const configured = (serverPath ?? "").trim();
  if (configured) {
    const command = expandPath(configured, places);
    if (!isFile(command)) {
      return { error: `vq-lsp: vqLsp.serverPath is set to "${configured}", but ${command} is not a file.` };
    }
    return { command, args };
  }
  const found = findOnPath("vq-lsp", pathEnv, places.platform ?? process.platform, isFile);
  if (!found) {
    return {
      error:
        "vq-lsp: the `vq-lsp` executable is not on PATH. Install the server (pip install -e . in a clone " +
        "of vq-lsp) and set vqLsp.serverPath to its path, e.g. /path/to/vq-lsp/.venv/bin/vq-lsp.",
    };
  }
  return { command: found, args };
}

export interface DocumentFilter {
  scheme: string;
  language?: string;
}

/** The documents the client syncs: the file types the server wants, saved or untitled. */
export function documentSelector(fileTypes: readonly string[] | undefined): DocumentFilter[] {
  const schemes = ["file", "untitled"];
  const types = fileTypes ?? [];
  if (types.includes("*")) {
    return schemes.map((scheme) => ({ scheme }));
  }
  return types.flatMap((language) => schemes.map((scheme) => ({ scheme, language })));
}

// ------------------------------------------------------------------ the server's answers

export interface ParagraphScores {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  tokens: [number, number];
  scores: Record<string, number>;
}

/** What `vqLsp/documentScores` returns (vq_lsp/documents/requests.py, `scores`). */
export interface DocumentScores {
  uri: string;
  version: number | null;
  scores: Record<string, number>;
  tokens: number;
  windows: number;
  paragraphs: ParagraphScores[];
  cost: Record<string, unknown> | null;
  updates: number;
  rebuilds: number;
  evictions: number;
  restores?: number; // states restored from the snapshot cache
  memory?: { bytes: number; budget_bytes: number; live_states: number; open_documents: number };
}

/** The most probable label and its probability. */
export function topLabel(scores: Record<string, number>): [string, number] | undefined {
  let best: [string, number] | undefined;
  for (const [label, p] of Object.entries(scores)) {
    if (best === undefined || p > best[1]) {
      best = [label, p];
    }
  }
  return best;
}

export function statusText(res: DocumentScores): string {
  const top = topLabel(res.scores);
  return top ? `$(pulse) ${top[0]} ${top[1].toFixed(2)}` : "$(pulse) vq-lsp";
}

export function statusTooltip(res: DocumentScores): string {
  const labels = Object.entries(res.scores).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ");
  return [
    `vq-lsp document score: ${labels}`,
    `${res.tokens} tokens, ${res.paragraphs.length} paragraphs, version ${res.version ?? "?"}`,
    `last update: ${costSummary(res)}`,
    "Click for the cost statistics of the last update.",
  ].join("\n");
}

/** 1234567 -> "1.23M". */
export function humanCount(n: number): string {
  const units: [number, string][] = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, unit] of units) {
    if (Math.abs(n) >= size) {
      return `${(n / size).toFixed(2)}${unit}`;
    }
  }
  return `${n}`;
}

function num(cost: Record<string, unknown>, key: string): number | undefined {
  const v = cost[key];
  return typeof v === "number" ? v : undefined;
}

function ms(seconds: number | undefined): string {
  return seconds === undefined ? "?" : `${(seconds * 1000).toFixed(1)} ms`;
}

/** Incremental MACs against a dense pass, worded the way it went: "20.0x fewer", or "1.1x more" when an
 *  update replaced most of the document (a paste over all of it costs a little more than a dense pass). */
export function macRatio(incremental: number, dense: number): string {
  if (incremental <= dense) {
    return `${(dense / Math.max(1, incremental)).toFixed(1)}x fewer`;
  }
  return `${(incremental / Math.max(1, dense)).toFixed(1)}x more`;
}

/** One line: what the last update of the document cost. */
export function costSummary(res: DocumentScores): string {
  const cost = res.cost;
  if (!cost) {
    return "no update yet";
  }
  const inc = num(cost, "incremental_macs");
  const dense = num(cost, "dense_macs");
  if (inc !== undefined && dense !== undefined) {
    return `${humanCount(inc)} MACs incremental vs ${humanCount(dense)} dense (${macRatio(inc, dense)}), ${ms(num(cost, "seconds"))}`;
  }
  if (num(cost, "rebuild_seconds") !== undefined) {
    return `full pass over ${num(cost, "tokens") ?? "?"} tokens in ${ms(num(cost, "rebuild_seconds"))} (no incremental update since)`;
  }
  if (num(cost, "restore_seconds") !== undefined) {
    return `restored from a snapshot: ${num(cost, "tokens") ?? "?"} tokens in ${ms(num(cost, "restore_seconds"))} ` +
      "(no incremental update since)";
  }
  return Object.keys(cost).sort().map((key) => `${key.replace(/_/g, " ")} ${readable(cost[key])}`).join(", ");
}

/** A value of an unknown cost field in words: numbers rounded, lists joined, never raw JSON. */
function readable(value: unknown): string {
  if (typeof value === "number") {
    return Number.isInteger(value) ? `${value}` : value.toPrecision(4);
  }
  if (Array.isArray(value)) {
    return value.map(readable).join("/");
  }
  if (value !== null && typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k} ${readable(v)}`).join(" ");
  }
  return String(value);
}

/** Several lines for the output channel: the cost statistics of the last update. */
export function formatCost(res: DocumentScores): string {
  const lines = [`vq-lsp: ${res.uri} (version ${res.version ?? "?"}, ${res.tokens} tokens, ${res.windows} windows)`];
  const top = topLabel(res.scores);
  if (top) {
    lines.push(`  document score: ${top[0]} ${top[1].toFixed(3)}`);
  }
  const cost = res.cost;
  lines.push(`  last update: ${costSummary(res)}`);
  if (cost && num(cost, "incremental_macs") !== undefined) {
    const dirty = cost["dirty_per_layer"];
    if (Array.isArray(dirty)) {
      lines.push(`  dirty positions per layer: ${dirty.join(", ")}`);
    }
    for (const [key, label] of [["splices", "token splices"], ["relabelled", "positions relabelled"],
      ["full_respreads", "full re-spreads"], ["near_ties", "near-tie rows recomputed"]] as const) {
      const v = num(cost, key);
      if (v !== undefined) {
        lines.push(`  ${label}: ${v}`);
      }
    }
  }
  lines.push(`  updates: ${res.updates}, rebuilds: ${res.rebuilds}, restores: ${res.restores ?? 0}, ` +
    `evictions: ${res.evictions}`);
  if (res.memory) {
    const mib = (b: number) => (b / 2 ** 20).toFixed(1);
    lines.push(`  engine memory: ${mib(res.memory.bytes)} MiB of ${mib(res.memory.budget_bytes)} MiB, ` +
      `${res.memory.live_states} live states, ${res.memory.open_documents} open documents`);
  }
  return lines.join("\n");
}

/**
 * Whether a change of diagnostics calls for new code lenses: the server published for a document
 * shown in an editor (its score, which the lens shows, changed with it). VS Code asks for lenses
 * again after edits, but not after a publish that no edit caused (the model loaded, settings changed).
 */
export function lensRefreshNeeded(changed: readonly string[], shown: readonly string[]): boolean {
  const visible = new Set(shown);
  return changed.some((uri) => visible.has(uri));
}

/** What `vqLsp.verify` returns (vq_lsp/documents/requests.py, `verify`). */
export interface VerifyResult {
  uri: string;
  version: number | null;
  codesEqual: boolean;
  maxAbsDiff: number;
  mismatchedCodes: number;
  tokensMatchText: boolean;
  seconds: number;
  rebuilt: boolean;
}

/** One line for the result of `vqLsp.verify`, and whether it passed. */
export function formatVerify(res: VerifyResult): { ok: boolean; text: string } {
  const ok = res.codesEqual && res.tokensMatchText && !res.rebuilt;
  const detail = `max |diff| ${res.maxAbsDiff.toExponential(2)}, ${res.mismatchedCodes} mismatched codes, ` +
    `${ms(res.seconds)}`;
  if (ok) {
    return { ok, text: `vq-lsp verify: the incremental state equals a full pass (${detail}).` };
  }
  const why = !res.tokensMatchText ? "its tokens disagree with the text" : "its codes differ from a full pass";
  return { ok, text: `vq-lsp verify: ${why} (${detail}); the state was rebuilt from the text.` };
}
