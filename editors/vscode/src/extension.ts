/**
 * The VS Code side of vq-lsp: starts the `vq-lsp` language server over stdio with
 * vscode-languageclient, forwards the `vqLsp.*` settings (initializationOptions at start,
 * workspace/didChangeConfiguration on change, always the whole set), shows the active document's
 * score in the status bar, asks for the code lens (the document score) again after every publish,
 * and offers two commands: restart the server, show the cost statistics of the last update.
 *
 * It knows nothing about the model: diagnostics, hover and the code lens come from the server
 * as they are. The pure parts (settings mapping, finding the executable, formatting) live in
 * helpers.ts.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as vscode from "vscode";
import {
  CodeLensRequest,
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";

import * as h from "./helpers";

function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

class VqLsp implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private selector: h.DocumentFilter[] = [];
  private readonly output = vscode.window.createOutputChannel("vq-lsp");
  private readonly status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  private readonly keys: string[];
  private statusSeq = 0; // answers to older status requests are dropped
  private starting: Promise<void> = Promise.resolve();

  constructor(packageJson: unknown) {
    this.keys = h.settingKeys(packageJson);
    this.status.name = "vq-lsp document score";
    this.status.command = "vqLsp.showCostStatistics";
  }

  private config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration(h.SECTION);
  }

  private places(): h.Places {
    return { home: os.homedir(), workspace: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath, exists: fs.existsSync };
  }

  /** The settings the server gets, as it names them. */
  settings(): Record<string, unknown> {
    return h.serverSettings(this.keys, this.config(), this.places());
  }

  /** Start the server (one start or stop at a time). */
  start(): Promise<void> {
    this.starting = this.starting.then(() => this.doStart(), () => this.doStart());
    return this.starting;
  }

  restart(): Promise<void> {
    this.starting = this.starting.then(() => this.doStop(), () => this.doStop()).then(() => this.doStart());
    return this.starting;
  }

  stop(): Promise<void> {
    this.starting = this.starting.then(() => this.doStop(), () => this.doStop());
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const cfg = this.config();
    const server = h.resolveServer(cfg.get<string>("serverPath"), cfg.get<string[]>("serverArgs"), process.env.PATH,
      this.places(), isFile);
    if ("error" in server) {
      this.showStatusError(server.error);
      // not awaited: a restart must not wait for the user to dismiss the message
      void vscode.window.showErrorMessage(server.error, "Open Settings").then((choice) => {
        if (choice === "Open Settings") {
          void vscode.commands.executeCommand("workbench.action.openSettings", "vqLsp.serverPath");
        }
      });
      return;
    }
    this.selector = h.documentSelector(cfg.get<string[]>("fileTypes"));
    const serverOptions: ServerOptions = { command: server.command, args: server.args, transport: TransportKind.stdio };
    const clientOptions: LanguageClientOptions = {
      documentSelector: this.selector,
      outputChannel: this.output,
      initializationOptions: () => this.settings(),
      middleware: {
        // The code lens runs vqLsp.verify on the server: show its answer.
        executeCommand: async (command, args, next) => {
          const result = await next(command, args);
          if (command === h.VERIFY && result && typeof result === "object") {
            const { ok, text } = h.formatVerify(result as h.VerifyResult);
            void (ok ? vscode.window.showInformationMessage(text) : vscode.window.showWarningMessage(text));
          }
          return result;
        },
        workspace: {
          // A server that pulls its settings (workspace/configuration) gets the same mapped values.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) {
              return result;
            }
            return result.map((value, i) => (params.items[i]?.section === h.SECTION ? this.settings() : value));
          },
        },
      },
    };
    const client = new LanguageClient("vqLsp", "vq-lsp", serverOptions, clientOptions);
    this.client = client;
    this.output.appendLine(`vq-lsp: starting ${server.command} ${server.args.join(" ")}`.trimEnd());
    try {
      await client.start();
    } catch (e) {
      this.showStatusError(`vq-lsp: the server failed to start: ${errorText(e)}`);
      void vscode.window.showErrorMessage(`vq-lsp: the server failed to start: ${errorText(e)}`);
      return;
    }
    void this.refreshStatus();
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.status.hide();
    if (client && client.state !== State.Stopped) {
      try {
        await client.stop();
      } catch (e) {
        this.output.appendLine(`vq-lsp: stopping the server: ${errorText(e)}`);
      }
    }
  }

  onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration(h.SECTION)) {
      return;
    }
    if (h.needsRestart((key) => e.affectsConfiguration(key))) {
      void this.restart();
      return;
    }
    // After a start in progress (whose initializationOptions may predate this change). The whole
    // set goes each time: a setting the user removed is sent with its default, never left out.
    const send = () => {
      const client = this.runningClient();
      if (client) {
        void client.sendNotification(DidChangeConfigurationNotification.type, {
          settings: { [h.SECTION]: this.settings() },
        });
      }
      void this.refreshStatus();
    };
    void this.starting.then(send, send);
  }

  private runningClient(): LanguageClient | undefined {
    const client = this.client;
    return client && client.state === State.Running ? client : undefined;
  }

  private handles(doc: vscode.TextDocument): boolean {
    return vscode.languages.match(this.selector, doc) > 0;
  }

  private async scores(client: LanguageClient, doc: vscode.TextDocument): Promise<h.DocumentScores> {
    return client.sendRequest<h.DocumentScores>(h.DOCUMENT_SCORES, {
      uri: client.code2ProtocolConverter.asUri(doc.uri),
    });
  }

  private showStatusError(text: string): void {
    this.status.text = "$(warning) vq-lsp";
    this.status.tooltip = text;
    this.status.show();
  }

  /** Ask the server for the active document's score and show it in the status bar. */
  async refreshStatus(): Promise<void> {
    const seq = ++this.statusSeq;
    const editor = vscode.window.activeTextEditor;
    const client = this.runningClient();
    if (!this.config().get<boolean>("statusBar", true) || !client || !editor || !this.handles(editor.document)) {
      this.status.hide();
      return;
    }
    try {
      const res = await this.scores(client, editor.document);
      if (seq !== this.statusSeq) {
        return;
      }
      this.status.text = h.statusText(res);
      this.status.tooltip = h.statusTooltip(res);
    } catch (e) {
      if (seq !== this.statusSeq) {
        return;
      }
      this.status.text = "$(pulse) vq-lsp: no score";
      this.status.tooltip = errorText(e);
    }
    this.status.show();
  }

  /** Diagnostics are published after every processed update: then the score is new too, in the
   * status bar and in the code lens. */
  onDiagnostics(e: vscode.DiagnosticChangeEvent): void {
    const changed = e.uris.map((u) => u.toString());
    const active = vscode.window.activeTextEditor?.document.uri.toString();
    if (active !== undefined && changed.includes(active)) {
      void this.refreshStatus();
    }
    const shown = vscode.window.visibleTextEditors.map((ed) => ed.document).filter((doc) => this.handles(doc));
    if (h.lensRefreshNeeded(changed, shown.map((doc) => doc.uri.toString()))) {
      this.refreshCodeLenses(shown[0]);
    }
  }

  /** Make VS Code ask the server for code lenses again (as the server's workspace/codeLens/refresh would). */
  private refreshCodeLenses(doc: vscode.TextDocument): void {
    const client = this.runningClient();
    client?.getFeature(CodeLensRequest.method)?.getProvider(doc)?.onDidChangeCodeLensEmitter.fire();
  }

  async showCostStatistics(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const client = this.runningClient();
    if (!client) {
      void vscode.window.showWarningMessage("vq-lsp: the server is not running (vq-lsp: Restart server starts it).");
      return;
    }
    if (!editor || !this.handles(editor.document)) {
      void vscode.window.showWarningMessage("vq-lsp: open a document the server gives hints for (see vqLsp.fileTypes).");
      return;
    }
    try {
      const res = await this.scores(client, editor.document);
      this.output.appendLine(h.formatCost(res));
      this.output.show(true);
      void vscode.window.showInformationMessage(`vq-lsp, last update: ${h.costSummary(res)}`);
    } catch (e) {
      void vscode.window.showErrorMessage(`vq-lsp: no cost statistics: ${errorText(e)}`);
    }
  }

  dispose(): void {
    void this.stop();
    this.status.dispose();
    this.output.dispose();
  }
}

let instance: VqLsp | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const ext = new VqLsp(context.extension.packageJSON);
  instance = ext;
  context.subscriptions.push(
    ext,
    vscode.commands.registerCommand("vqLsp.restartServer", () => ext.restart()),
    vscode.commands.registerCommand("vqLsp.showCostStatistics", () => ext.showCostStatistics()),
    vscode.workspace.onDidChangeConfiguration((e) => ext.onConfigurationChanged(e)),
    vscode.window.onDidChangeActiveTextEditor(() => void ext.refreshStatus()),
    vscode.languages.onDidChangeDiagnostics((e) => ext.onDiagnostics(e)),
  );
  await ext.start();
}

export async function deactivate(): Promise<void> {
  await instance?.stop();
  instance = undefined;
}
