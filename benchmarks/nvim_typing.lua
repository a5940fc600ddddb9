-- Types into a real headless Neovim through the vq-lsp plugin, for benchmarks/nvim_typing.py:
-- opens VQ_BENCH_FILE, waits for its first hints, then types VQ_BENCH_TEXT one character every
-- VQ_BENCH_INTERVAL_MS at byte VQ_BENCH_OFFSET, and records when each keystroke was made and
-- when each version's diagnostics were published. Writes VQ_BENCH_OUT as JSON.
-- VQ_BENCH_DEBOUNCE_MS, when set, overrides the plugin's `debounce_text_changes`.

local env = vim.env
vim.opt.runtimepath:prepend(env.VQ_BENCH_PLUGIN)
local out = { keys = {}, publishes = {}, ok = false }
local PUBLISH = "textDocument/publishDiagnostics"
local clock = function() return vim.uv.hrtime() / 1e6 end

local default = vim.lsp.handlers[PUBLISH] or vim.lsp.diagnostic.on_publish_diagnostics
vim.lsp.handlers[PUBLISH] = function(err, result, ctx, config) -- the plugin's handler calls this one
  if result and result.version then
    table.insert(out.publishes, { version = result.version, ms = clock() })
  end
  return default(err, result, ctx, config)
end

local override = { cmd = { env.VQ_BENCH_SERVER }, settings = { vqLsp = { device = "cpu" } } }
if env.VQ_BENCH_DEBOUNCE_MS and env.VQ_BENCH_DEBOUNCE_MS ~= "" then
  override.flags = { debounce_text_changes = tonumber(env.VQ_BENCH_DEBOUNCE_MS) }
end
vim.lsp.config("vq_lsp", override)
vim.lsp.enable("vq_lsp")

local function finish(err)
  out.ok = err == nil
  out.error = err
  local f = assert(io.open(env.VQ_BENCH_OUT, "w"))
  f:write(vim.json.encode(out))
  f:close()
  vim.cmd("qall!")
end

local function run()
  vim.cmd.edit(vim.fn.fnameescape(env.VQ_BENCH_FILE))
  local buf = vim.api.nvim_get_current_buf()
  if not vim.wait(120000, function() return #out.publishes > 0 end, 20) then
    return finish("no hints after opening the document")
  end
  local client = vim.lsp.get_clients({ bufnr = buf, name = "vq_lsp" })[1]
  out.debounce_ms = client.flags and client.flags.debounce_text_changes
  local offset = tonumber(env.VQ_BENCH_OFFSET)
  local row = vim.fn.byte2line(offset + 1) - 1
  local col = offset - vim.fn.line2byte(row + 1) + 1
  local interval = tonumber(env.VQ_BENCH_INTERVAL_MS)
  local text = env.VQ_BENCH_TEXT
  for i = 1, #text do
    local ch = text:sub(i, i)
    vim.api.nvim_buf_set_text(buf, row, col, row, col, { ch })
    col = col + 1
    table.insert(out.keys, { version = vim.lsp.util.buf_versions[buf], ms = clock() })
    vim.wait(interval, function() return false end, 5)
  end
  local last = out.keys[#out.keys].version
  local done = vim.wait(30000, function()
    for _, p in ipairs(out.publishes) do
      if p.version >= last then return true end
    end
    return false
  end, 5)
  finish(not done and "the last version got no hints" or nil)
end

vim.schedule(function()
  local ok, err = pcall(run)
  if not ok then finish(tostring(err)) end
end)
