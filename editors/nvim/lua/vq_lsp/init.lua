--- vq-lsp for Neovim 0.11+: starts the `vq-lsp` language server through `vim.lsp.config` /
--- `vim.lsp.enable`, passes the server's settings (initializationOptions, and
--- workspace/didChangeConfiguration through `update_settings`), and adds two user commands:
--- `:VqLspScore` (the document score, and the paragraph's at the cursor) and `:VqLspCost` (what
--- the last update cost). `statusline()` gives the score for a statusline.
---
--- Diagnostics, hover and the code lens come from the server as they are; nothing of the
--- server's logic is repeated here. The settings are the server's own (vq_lsp/settings.py),
--- camelCase, the same names as VS Code's `vqLsp.*` settings without the prefix:
---
---   require("vq_lsp").setup({
---     cmd = { "/path/to/vq-lsp/.venv/bin/vq-lsp" },   -- default: { "vq-lsp" } from PATH
---     settings = { modelPath = "/path/to/model", diagnostics = { sentimentThreshold = 0.8 } },
---   })

local M = {}

M.name = "vq_lsp"
M.section = "vqLsp"
M.DOCUMENT_SCORES = "vqLsp/documentScores"
M.VERIFY = "vqLsp.verify"

--- Neovim filetypes of the server's default `fileTypes` (Neovim sends the filetype as languageId).
M.default_filetypes = { "text", "markdown", "rst", "asciidoc", "org", "tex", "mail", "gitcommit" }

--- The base client configuration (also what `lsp/vq_lsp.lua` returns, so that a plain
--- `vim.lsp.enable("vq_lsp")` works with the defaults).
function M.base_config()
  return {
    cmd = { "vq-lsp" },
    filetypes = vim.deepcopy(M.default_filetypes),
    root_markers = { ".git" },
  }
end

local state = { settings = {} }

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

--- The filetypes the client attaches to: `opts.filetypes`, else the server's `fileTypes`
--- setting when given (`*`: every filetype), else the defaults.
local function filetypes(opts)
  if opts.filetypes then
    return opts.filetypes
  end
  local ft = opts.settings and opts.settings.fileTypes
  if type(ft) == "string" then
    ft = { ft }
  end
  if type(ft) == "table" then
    return vim.tbl_contains(ft, "*") and nil or ft
  end
  return vim.deepcopy(M.default_filetypes)
end

--- Configure and enable the client. `opts`: `cmd`, `settings` (the server's), `filetypes`,
--- `root_markers`, `on_attach`, `capabilities`, `statusline` (default true: keep the score
--- that `statusline()` shows up to date after every publish of diagnostics).
function M.setup(opts)
  if vim.fn.has("nvim-0.11") ~= 1 then
    vim.notify("vq-lsp: Neovim 0.11 or newer is needed (vim.lsp.config)", vim.log.levels.ERROR)
    return
  end
  opts = opts or {}
  state.settings = vim.deepcopy(opts.settings or {})
  local config = vim.tbl_extend("force", M.base_config(), {
    init_options = as_object(state.settings),
    settings = { [M.section] = as_object(state.settings) },
  })
  config.filetypes = filetypes(opts)
  for _, key in ipairs({ "cmd", "root_markers", "on_attach", "capabilities" }) do
    if opts[key] ~= nil then
      config[key] = opts[key]
    end
  end
  local exe = type(config.cmd) == "table" and config.cmd[1] or nil
  if exe and vim.fn.executable(exe) ~= 1 then
    vim.notify(("vq-lsp: %s is not executable; install the server (pip install -e . in a clone of vq-lsp) "
      .. "and pass its path as setup({ cmd = { '/path/to/.venv/bin/vq-lsp' } })"):format(exe), vim.log.levels.WARN)
  end
  vim.lsp.config(M.name, config)
  vim.lsp.enable(M.name)
  M.create_commands()
  if opts.statusline ~= false then
    M.track_status()
  end
end

--- Send new settings to the running servers (workspace/didChangeConfiguration); `settings` is
--- merged into the current ones.
function M.update_settings(settings)
  state.settings = vim.tbl_deep_extend("force", state.settings, settings or {})
  local section = { [M.section] = as_object(state.settings) }
  vim.lsp.config(M.name, { settings = section, init_options = as_object(state.settings) })
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    client.settings = section
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

local function top(scores)
  local label, best
  for k, v in pairs(scores or {}) do
    if best == nil or v > best then
      label, best = k, v
    end
  end
  return label, best
end

--- "vq-lsp: positive 0.83 (document, 42 tokens); paragraph: negative 0.61" for a scores answer and
--- a 0-based cursor line.
function M.format_score(res, line)
  local label, p = top(res.scores)
  if not label then
    return "vq-lsp: no score"
  end
  local text = ("vq-lsp: %s %.2f (document, %d tokens, %d paragraphs)"):format(label, p, res.tokens, #res.paragraphs)
  for _, para in ipairs(res.paragraphs or {}) do
    if line and para.range.start.line <= line and line <= para.range["end"].line then
      local pl, pp = top(para.scores)
      text = text .. ("; paragraph: %s %.2f"):format(pl, pp)
      break
    end
  end
  return text
end

local function human(n)
  for _, u in ipairs({ { 1e12, "T" }, { 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" } }) do
    if math.abs(n) >= u[1] then
      return ("%.2f%s"):format(n / u[1], u[2])
    end
  end
  return tostring(n)
end

--- What the last update cost, in a few lines.
function M.format_cost(res)
  local c = res.cost
  if c == nil or c == vim.NIL then
    return "vq-lsp: no update yet"
  end
  if c.incremental_macs then
    return table.concat({
      ("vq-lsp: last update of version %s: %s MACs incremental vs %s dense (%.1fx fewer), %.1f ms"):format(
        tostring(res.version), human(c.incremental_macs), human(c.dense_macs), c.speedup or 0, (c.seconds or 0) * 1000),
      ("dirty positions per layer: %s; relabelled %s, near ties %s; updates %d, rebuilds %d"):format(
        table.concat(vim.tbl_map(tostring, c.dirty_per_layer or {}), ", "), tostring(c.relabelled),
        tostring(c.near_ties), res.updates or 0, res.rebuilds or 0),
    }, "\n")
  end
  if c.rebuild_seconds then
    return ("vq-lsp: full pass over %s tokens in %.1f ms (no incremental update since)"):format(
      tostring(c.tokens), c.rebuild_seconds * 1000)
  end
  return "vq-lsp: " .. vim.json.encode(c)
end

function M.create_commands()
  vim.api.nvim_create_user_command("VqLspScore", function()
    local buf, line = vim.api.nvim_get_current_buf(), vim.api.nvim_win_get_cursor(0)[1] - 1
    M.scores(buf, function(err, res)
      if err then
        vim.notify("vq-lsp: no score: " .. err, vim.log.levels.WARN)
      else
        vim.notify(M.format_score(res, line), vim.log.levels.INFO)
      end
    end)
  end, { desc = "vq-lsp: show the document score (and the paragraph's at the cursor)" })
  vim.api.nvim_create_user_command("VqLspCost", function()
    M.scores(0, function(err, res)
      if err then
        vim.notify("vq-lsp: no cost statistics: " .. err, vim.log.levels.WARN)
      else
        vim.notify(M.format_cost(res), vim.log.levels.INFO)
      end
    end)
  end, { desc = "vq-lsp: show the cost statistics of the last update" })
end

--- The score of a buffer for a statusline ("" until known), kept fresh by `track_status`.
function M.statusline(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  return vim.b[bufnr].vq_lsp_score or ""
end

--- After every publish of diagnostics to a vq-lsp buffer (a finished update), fetch its score.
function M.track_status()
  local group = vim.api.nvim_create_augroup("vq_lsp_status", { clear = true })
  vim.api.nvim_create_autocmd("DiagnosticChanged", {
    group = group,
    callback = function(ev)
      local buf = ev.buf
      if not vim.api.nvim_buf_is_valid(buf) or #vim.lsp.get_clients({ bufnr = buf, name = M.name }) == 0 then
        return
      end
      M.scores(buf, function(err, res)
        if vim.api.nvim_buf_is_valid(buf) then
          local label, p = top(res and res.scores)
          vim.b[buf].vq_lsp_score = (not err and label) and ("%s %.2f"):format(label, p) or ""
        end
      end)
    end,
  })
end

return M
