--- How the server's hints are shown in Neovim: where tone diagnostics go, and keeping the code
--- lens (the document score) current. Client-side presentation only; the server is not asked
--- for anything different.
---
--- Tone diagnostics span whole paragraphs, so Neovim's default underline marks every line of
--- prose. `tone_display` picks where they go instead:
---   "signs"        (default) a sign in the sign column on the paragraph's first line
---   "virtual_text" the tone as virtual text at the end of the paragraph's first line
---   "lens"         not on display: the document's tone is in the code lens, a paragraph's in
---                  :VqLspScore, hover and vim.diagnostic.open_float()
---   "underline"    as the server sends them (Neovim's diagnostic settings)
--- The tone stays in vim.diagnostic.get() and the location list whichever is chosen.
---
--- It works per namespace with severity filters (vim.diagnostic.config(opts, namespace)): the
--- server gives tone, and only tone, Information severity; typo and surprise hints are Hints.
--- Other severities keep the user's global choices.

local M = {}

M.TONE_DISPLAYS = { "signs", "virtual_text", "lens", "underline" }
M.DEFAULT_TONE_DISPLAY = "signs"

local S = vim.diagnostic.severity
local TONE = { S.INFO }
local NOT_TONE = { S.ERROR, S.WARN, S.HINT }

--- A global display option (`underline`, `signs`, ...) limited to the severities in `keep`.
local function only(value, keep)
  if value == nil or value == false then
    return false
  end
  local out = type(value) == "table" and vim.deepcopy(value) or {}
  out.severity = keep
  return out
end

--- A display option on for every severity (with the user's settings for it, if a table).
local function every(value)
  if type(value) ~= "table" then
    return true
  end
  local out = vim.deepcopy(value)
  out.severity = nil
  return out
end

--- The per-namespace diagnostic options for a `tone_display` choice (nil: leave Neovim's own).
function M.namespace_options(tone_display, global)
  global = global or vim.diagnostic.config() or {}
  if tone_display == "underline" then
    return nil
  end
  local opts = {
    underline = only(global.underline, NOT_TONE),
    virtual_text = only(global.virtual_text, NOT_TONE),
    signs = only(global.signs, NOT_TONE),
  }
  if global.virtual_lines ~= nil then -- Neovim 0.11+
    opts.virtual_lines = only(global.virtual_lines, NOT_TONE)
  end
  if tone_display == "signs" then
    opts.signs = every(global.signs)
  elseif tone_display == "virtual_text" then -- hints keep virtual text only if the user has it on
    opts.virtual_text = global.virtual_text and every(global.virtual_text) or { severity = TONE }
  end
  return opts
end

--- Check a `tone_display` value; returns it, or the default with a warning.
function M.check_tone_display(value)
  if value == nil then
    return M.DEFAULT_TONE_DISPLAY
  end
  if vim.tbl_contains(M.TONE_DISPLAYS, value) then
    return value
  end
  vim.notify(("vq-lsp: tone_display = %s is not one of %s; using %q"):format(
    vim.inspect(value), table.concat(M.TONE_DISPLAYS, ", "), M.DEFAULT_TONE_DISPLAY), vim.log.levels.WARN)
  return M.DEFAULT_TONE_DISPLAY
end

--- Apply a `tone_display` choice to a client's diagnostics (its push namespace).
function M.apply_tone_display(client, tone_display)
  local ns = vim.lsp.diagnostic.get_namespace(client.id, false)
  local opts = M.namespace_options(tone_display)
  if opts then
    vim.diagnostic.config(opts, ns)
  end
end

--- Ask for a buffer's code lenses again (its score changes with every update). Neovim 0.12+
--- keeps lenses enabled with vim.lsp.codelens.enable() and refetches them after edits; a
--- publish that no edit caused (a new model, changed settings) is handled as the server's
--- workspace/codeLens/refresh would be. Neovim 0.10 and 0.11: vim.lsp.codelens.refresh({ bufnr }).
function M.refresh_lens(client, bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local codelens = vim.lsp.codelens
  if codelens.enable then
    if not codelens.is_enabled({ bufnr = bufnr }) then
      codelens.enable(true, { bufnr = bufnr })
    else
      local refresh = vim.lsp.handlers["workspace/codeLens/refresh"]
      if refresh then
        refresh(nil, nil, { client_id = client.id, method = "workspace/codeLens/refresh" })
      end
    end
  elseif vim.fn.has("nvim-0.10") == 1 then
    codelens.refresh({ bufnr = bufnr })
  elseif bufnr == vim.api.nvim_get_current_buf() then
    codelens.refresh() -- Neovim 0.9: the current buffer only
  end
end

--- The code lenses shown for a buffer, as LSP CodeLens tables (any Neovim version).
function M.lenses(bufnr)
  local codelens = vim.lsp.codelens
  if codelens.enable then
    return vim.tbl_map(function(item)
      return item.lens
    end, codelens.get({ bufnr = bufnr }))
  end
  return codelens.get(bufnr)
end

return M
