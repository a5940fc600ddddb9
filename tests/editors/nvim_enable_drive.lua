-- Drives a headless Neovim through the plugin's `lsp/vq_lsp.lua` path, for
-- tests/editors/test_nvim.py: nothing but the plugin folder on the runtimepath, the plugin's
-- option `vim.g.vq_lsp`, one `vim.lsp.config` override (the model) and `vim.lsp.enable("vq_lsp")`;
-- `vq-lsp` is found on PATH. Opens a Markdown file and records the client, the diagnostics,
-- how they are shown, the code lens and what :VqLspScore says, to VQ_TEST_OUT as JSON.

local env = vim.env
vim.opt.runtimepath:prepend(env.VQ_TEST_PLUGIN)
local H = dofile(env.VQ_TEST_HELPERS)
local out, step, wait, count = H.out, H.step, H.wait, H.count

vim.g.vq_lsp = { tone_display = env.VQ_TEST_TONE_DISPLAY }
vim.lsp.config("vq_lsp", {
  settings = { vqLsp = { modelPath = env.VQ_TEST_MODEL, device = "cpu",
                         diagnostics = { sentimentThreshold = 0.0, toneMinWords = 0, typo = false } } },
})
vim.lsp.enable("vq_lsp")

H.after_startup(function()
  vim.cmd.edit(vim.fn.fnameescape(env.VQ_TEST_FILE))
  local buf = vim.api.nvim_get_current_buf()
  out.filetype = vim.bo[buf].filetype
  wait("the client to attach", function() return #vim.lsp.get_clients({ bufnr = buf, name = "vq_lsp" }) > 0 end)
  local client = vim.lsp.get_clients({ bufnr = buf, name = "vq_lsp" })[1]
  out.cmd = client.config.cmd
  out.debounce_ms = client.flags.debounce_text_changes
  step("attached")

  wait("the tone diagnostic", function() return count(buf, "sentiment") == 1 end)
  out.diagnostics = H.dump_diagnostics(buf)
  out.shown = H.shown(buf)
  step("diagnostics")

  local scores = H.request(client, "vqLsp/documentScores", { uri = vim.uri_from_bufnr(buf) }, buf)
  local lens = H.expected_lens(scores)
  wait("the code lens with the document score", function()
    return vim.tbl_contains(H.lens_titles(buf), lens) and H.virtual_has(buf, lens)
  end)
  out.scores = scores
  out.lens_titles = H.lens_titles(buf)
  step("code lens")

  local from = #out.messages
  vim.cmd("VqLspScore")
  wait(":VqLspScore's answer", function() return H.notified("^vq%-lsp:", from) end)
  out.score_message = H.notified("^vq%-lsp:", from)
  step("commands")

  -- vq-lsp.toml written by another program (Neovim reports no file changes): applies without a restart
  local config = vim.fs.joinpath(vim.fn.getcwd(), "vq-lsp.toml")
  local function write(text)
    local f = assert(io.open(config, "w"))
    f:write(text)
    f:close()
  end
  local t0 = vim.uv.hrtime()
  write("[diagnostics]\nsentiment = false\n")
  wait("the tone hint to go once vq-lsp.toml turns tone off", function() return count(buf, "sentiment") == 0 end)
  out.toml_applied_ms = (vim.uv.hrtime() - t0) / 1e6
  from = #out.messages
  write('[diagnostics]\nsentiment-threshold = "high"\n')
  wait("a message naming the bad value", function() return H.notified("sentimentThreshold", from) end)
  out.bad_value_message = H.notified("sentimentThreshold", from)
  step("workspace file")
end)
