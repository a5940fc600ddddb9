--- vq-lsp for Neovim 0.11+: the `vq-lsp` language server through `vim.lsp.config` /
--- `vim.lsp.enable`, its settings, and what the built-in client does not show on its own: the
--- code lens kept current, tone diagnostics off the text (`tone_display`), `:VqLspScore` (the
--- document score, and the paragraph's at the cursor), `:VqLspCost` (what the last update cost)
--- and `statusline()`.
---
--- Two ways in, the same client:
---
---   vim.lsp.enable("vq_lsp")   -- lsp/vq_lsp.lua on the runtimepath returns `base_config()`;
---   vim.lsp.config("vq_lsp", { cmd = { ... }, settings = { vqLsp = { modelPath = "..." } } })
---
---   require("vq_lsp").setup({  -- older configurations: configures and enables it
---     cmd = { "/path/to/vq-lsp/.venv/bin/vq-lsp" },   -- default: { "vq-lsp" } from PATH
---     settings = { modelPath = "/path/to/model", diagnostics = { sentimentThreshold = 0.8 } },
---   })
---
--- Diagnostics, hover and the code lens come from the server as they are; nothing of the
--- server's logic is repeated here. The settings are the server's own (vq_lsp/settings.py),
--- camelCase, the same names as VS Code's `vqLsp.*` settings without the prefix.

local display = require("vq_lsp.display")
local format = require("vq_lsp.format")

local M = {}

M.name = "vq_lsp"
M.section = "vqLsp"
M.DOCUMENT_SCORES = "vqLsp/documentScores"
M.VERIFY = "vqLsp.verify"
M.PUBLISH = "textDocument/publishDiagnostics"

--- Every edit goes to the server as it happens: the server coalesces a burst of edits itself, so
--- the client's own delay (Neovim's default is 150 ms, restarted by every key) only makes hints
--- wait until the writer pauses. Measured by benchmarks/nvim_typing.py.
M.DEBOUNCE_MS = 0

--- Neovim filetypes of the server's default `fileTypes` (Neovim sends the filetype as languageId).
M.default_filetypes = { "text", "markdown", "rst", "asciidoc", "org", "tex", "mail", "gitcommit" }

--- The plugin's own options (not the server's): from `setup()`, else `vim.g.vq_lsp`.
---   tone_display: "signs" (default) | "virtual_text" | "lens" | "underline" (see vq_lsp.display)
---   statusline:   keep `statusline()` current after every publish (default true)
local options = nil

function M.options()
  if options == nil then
    local given = type(vim.g.vq_lsp) == "table" and vim.g.vq_lsp or {}
    options = { tone_display = display.check_tone_display(given.tone_display), statusline = given.statusline ~= false }
  end
  return options
end

--- A copy of `t` in which empty tables that stand for JSON objects encode as `{}`, not `[]`.
local function as_object(t)
  if type(t) ~= "table" then
    return t
  end
  if next(t) == nil then
    return vim.empty_dict()
  end
  if vim.islist(t) then
    return vim.deepcopy(t)
  end
  local out = {}
  for k, v in pairs(t) do
    out[k] = (type(v) == "table" and not vim.islist(v)) and as_object(v) or vim.deepcopy(v)
  end
  return out
end

--- The server's settings in a client configuration (`settings.vqLsp`), or {}.
local function section_of(config)
  local s = config and config.settings and config.settings[M.section]
  return type(s) == "table" and s or {}
end

--- After every publish of diagnostics (a finished update): the code lens and the statusline
--- score follow. The publish itself goes to the handler Neovim (or the user) has for it.
local function on_publish(err, result, ctx, config)
  local handler = vim.lsp.handlers[M.PUBLISH] or vim.lsp.diagnostic.on_publish_diagnostics
  local ret = handler(err, result, ctx, config)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local bufnr = result and result.uri and vim.uri_to_bufnr(result.uri)
  if client and bufnr and vim.api.nvim_buf_is_loaded(bufnr) then
    display.refresh_lens(client, bufnr)
    if M.options().statusline then
      M.update_status(bufnr)
    end
  end
  return ret
end

--- The code lens' command (`vqLsp.verify`, a full pass that checks the incremental state) as a
--- client command: it runs on the server as before, and its answer is said in one line (Neovim
--- would drop it). Client:exec_cmd looks here first, so vim.lsp.codelens.run() comes here.
local function verify_command(command, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return
  end
  local params = { command = command.command, arguments = command.arguments }
  client:request("workspace/executeCommand", params, function(err, result)
    if err then
      vim.notify("vq-lsp verify failed: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif type(result) == "table" then
      local text, ok = format.verify(result)
      vim.notify(text, ok and vim.log.levels.INFO or vim.log.levels.WARN)
    end
    if ctx.bufnr and vim.api.nvim_buf_is_loaded(ctx.bufnr) then
      display.refresh_lens(client, ctx.bufnr)
    end
  end, ctx.bufnr)
end

--- Settings known when the client starts go as initializationOptions too: the server loads the
--- model they name at once instead of loading its default first.
local function before_init(params, config)
  if params.initializationOptions == nil or params.initializationOptions == vim.NIL then
    params.initializationOptions = as_object(section_of(config))
  end
end

local function on_attach(client, bufnr)
  M.create_commands()
  display.apply_tone_display(client, M.options().tone_display)
  display.refresh_lens(client, bufnr)
end

--- The base client configuration: what `lsp/vq_lsp.lua` returns, so that `vim.lsp.enable("vq_lsp")`
--- works with the defaults and `vim.lsp.config("vq_lsp", {...})` overrides any part of it.
--- The attach steps run from an LspAttach autocommand, so that a user's `on_attach` adds to them.
function M.base_config()
  local group = vim.api.nvim_create_augroup("vq_lsp_attach", { clear = true })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.name then
        on_attach(client, ev.buf)
      end
    end,
  })
  return {
    cmd = { "vq-lsp" },
    filetypes = vim.deepcopy(M.default_filetypes),
    root_markers = { "vq-lsp.toml", ".git" },
    flags = { debounce_text_changes = M.DEBOUNCE_MS },
    before_init = before_init,
    handlers = { [M.PUBLISH] = on_publish },
    commands = { [M.VERIFY] = verify_command },
  }
end

--- Make `section` ({ vqLsp = {...} }) the configuration's settings, replacing (not merging into)
--- the ones before: vim.lsp.config("vq_lsp", cfg) deep-merges, so a removed key would stay.
local function replace_settings(section)
  local config = vim.deepcopy(vim.lsp.config[M.name] or {})
  config.name = nil
  config.settings = section
  vim.lsp.config[M.name] = config
end

--- The filetypes the client attaches to: `opts.filetypes`, else the server's `fileTypes`
--- setting when given (`*`: every filetype Neovim knows), else the defaults.
local function filetypes(opts)
  if opts.filetypes then
    return opts.filetypes
  end
  local ft = opts.settings and opts.settings.fileTypes
  if type(ft) == "string" then
    ft = { ft }
  end
  if type(ft) == "table" then
    return vim.tbl_contains(ft, "*") and vim.fn.getcompletion("", "filetype") or ft
  end
  return vim.deepcopy(M.default_filetypes)
end

--- Configure and enable the client (for configurations that predate `vim.lsp.enable`).
--- `opts`: `cmd`, `settings` (the server's), `filetypes`, `root_markers`, `on_attach`,
--- `capabilities`, and the plugin's options `tone_display` and `statusline` (see `options`).
function M.setup(opts)
  if vim.fn.has("nvim-0.11") ~= 1 then
    vim.notify("vq-lsp: Neovim 0.11 or newer is needed (vim.lsp.config)", vim.log.levels.ERROR)
    return
  end
  opts = opts or {}
  options = {
    tone_display = display.check_tone_display(opts.tone_display),
    statusline = opts.statusline ~= false,
  }
  local config = { settings = { [M.section] = as_object(opts.settings or {}) }, filetypes = filetypes(opts) }
  if #vim.api.nvim_get_runtime_file(("lsp/%s.lua"):format(M.name), false) == 0 then
    -- loaded without its lsp/ folder on the runtimepath: what that file gives comes from here
    local current = vim.lsp.config[M.name] or {}
    for key, value in pairs(M.base_config()) do
      if config[key] == nil and current[key] == nil then
        config[key] = value
      end
    end
  end
  for _, key in ipairs({ "cmd", "root_markers", "on_attach", "capabilities" }) do
    if opts[key] ~= nil then
      config[key] = opts[key]
    end
  end
  local exe = type(config.cmd) == "table" and config.cmd[1] or "vq-lsp"
  if vim.fn.executable(exe) ~= 1 then
    vim.notify(("vq-lsp: %s is not executable; install the server (pip install -e . in a clone of vq-lsp) "
      .. "and pass its path as setup({ cmd = { '/path/to/.venv/bin/vq-lsp' } })"):format(exe), vim.log.levels.WARN)
  end
  local settings = config.settings
  config.settings = nil
  vim.lsp.config(M.name, config) -- merged into lsp/vq_lsp.lua and any vim.lsp.config("vq_lsp", ...) override
  replace_settings(settings)
  vim.lsp.enable(M.name)
  M.create_commands()
end

--- The server's current settings (a copy): those of the running client, else of the configuration.
function M.settings()
  local client = vim.lsp.get_clients({ name = M.name })[1]
  local config = client and client.config or vim.lsp.config[M.name]
  local current = client and client.settings and client.settings[M.section] or section_of(config)
  return vim.deepcopy(current)
end

--- Replace the server's settings with `settings` (the whole set, as in `setup`): the running
--- servers get them through workspace/didChangeConfiguration and clients started later start
--- with them. A key left out is gone: the server goes back to its value at start (the
--- initializationOptions), else to its default. To change one setting, edit a copy of `settings()`.
function M.update_settings(settings)
  local section = { [M.section] = as_object(settings or {}) }
  replace_settings(section)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    client.settings = vim.deepcopy(section)
    client:notify("workspace/didChangeConfiguration", { settings = section })
  end
end

--- Ask the server for a buffer's scores: `callback(err, result)` (result: vqLsp/documentScores).
function M.scores(bufnr, callback)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = M.name })[1]
  if not client then
    callback("vq-lsp is not attached to this buffer (see :checkhealth vim.lsp)", nil)
    return
  end
  client:request(M.DOCUMENT_SCORES, { uri = vim.uri_from_bufnr(bufnr) }, function(err, result)
    if err then
      callback(err.message or vim.inspect(err), nil)
    else
      callback(nil, result)
    end
  end, bufnr)
end

M.format_score = format.score
M.format_cost = format.cost

function M.create_commands()
  vim.api.nvim_create_user_command("VqLspScore", function()
    local buf, line = vim.api.nvim_get_current_buf(), vim.api.nvim_win_get_cursor(0)[1] - 1
    M.scores(buf, function(err, res)
      if err then
        vim.notify("vq-lsp: no score: " .. err, vim.log.levels.WARN)
      else
        vim.notify(format.score(res, line), vim.log.levels.INFO)
      end
    end)
  end, { desc = "vq-lsp: show the document score (and the paragraph's at the cursor)" })
  vim.api.nvim_create_user_command("VqLspCost", function()
    M.scores(0, function(err, res)
      if err then
        vim.notify("vq-lsp: no cost statistics: " .. err, vim.log.levels.WARN)
      else
        vim.notify(format.cost(res), vim.log.levels.INFO)
      end
    end)
  end, { desc = "vq-lsp: show the cost statistics of the last update" })
end

--- The score of a buffer for a statusline ("" until known), kept current after every publish.
function M.statusline(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  return vim.b[bufnr].vq_lsp_score or ""
end

--- Fetch a buffer's score for `statusline()`.
function M.update_status(bufnr)
  M.scores(bufnr, function(err, res)
    if vim.api.nvim_buf_is_valid(bufnr) then
      local label, p = format.top(res and res.scores)
      vim.b[bufnr].vq_lsp_score = (not err and label) and ("%s %.2f"):format(label, p) or ""
    end
  end)
end

--- Keep `statusline()` current after every publish (the default; `statusline = false` turns it off).
function M.track_status()
  M.options().statusline = true
end

return M
