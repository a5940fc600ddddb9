-- Headless Neovim as a real LSP client of vq-lsp (run by test_neovim.py with `nvim --headless --clean -l`).
-- Opens a text buffer, starts vq-lsp through vim.lsp.start, edits the buffer, waits for the
-- diagnostics of the buffer's newest version, and writes what it saw as JSON to $VQ_OUT.
local file, out_path = os.getenv("VQ_FILE"), os.getenv("VQ_OUT")
local out = { published = {}, errors = {} }

local function fail(msg)
  out.errors[#out.errors + 1] = msg
  vim.fn.writefile({ vim.json.encode(out) }, out_path)
  vim.cmd("qall!")
end

vim.cmd.edit(file)
local buf = vim.api.nvim_get_current_buf()
vim.bo[buf].filetype = "text"

local default = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
  table.insert(out.published, { version = result.version or vim.NIL, count = #result.diagnostics })
  return default(err, result, ctx, config)
end

local id = vim.lsp.start({
  name = "vq-lsp",
  cmd = { os.getenv("VQ_LSP") },
  root_dir = vim.fs.dirname(file),
  init_options = {
    modelPath = os.getenv("VQ_MODEL"),
    diagnostics = { sentimentThreshold = 0, surprise = true, surpriseThreshold = 0, maxSurpriseHints = 3, typo = false,
                    toneMinWords = 0 },
  },
}, { bufnr = buf })
if not id then
  fail("vim.lsp.start returned nil")
end
local client = vim.lsp.get_client_by_id(id)

local function published(version)
  for _, p in ipairs(out.published) do
    if p.version == version then
      return true
    end
  end
  return false
end

local function wait_version(what)
  local tick = vim.lsp.util.buf_versions[buf] -- the version Neovim sent with its last change
  if not vim.wait(60000, function() return published(tick) end, 20) then
    fail("no diagnostics for version " .. tick .. " (" .. what .. ")")
  end
  return tick
end

out.open_version = wait_version("open")
-- edits: an insertion with an emoji inside the first line, a new paragraph, a deletion
vim.api.nvim_buf_set_text(buf, 0, 4, 0, 4, { "really 😀 " })
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "", "A second paragraph, typed in Neovim." })
vim.api.nvim_buf_set_text(buf, 0, 0, 0, 4, { "" })
out.final_version = wait_version("edits")

local uri = vim.uri_from_bufnr(buf)
local res = client:request_sync("vqLsp/documentScores", { uri = uri }, 30000, buf)
if not res or res.err then
  fail("documentScores failed: " .. vim.inspect(res))
end
out.scores = res.result
res = client:request_sync("workspace/executeCommand", { command = "vqLsp.verify", arguments = { uri } }, 30000, buf)
if not res or res.err then
  fail("verify failed: " .. vim.inspect(res))
end
out.verify = res.result

out.diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(out.diagnostics, { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
    severity = d.severity, message = d.message })
end
out.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
vim.fn.writefile({ vim.json.encode(out) }, out_path)
client:stop(true)
vim.cmd("qall!")
