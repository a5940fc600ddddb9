-- Drives a headless Neovim through the vq_lsp plugin's setup() path, for tests/editors/test_nvim.py.
-- Reads its parameters from the environment (VQ_TEST_*), opens a Markdown file, types two new
-- paragraphs, waits for the diagnostics that follow, records how they and the code lens are shown,
-- runs :VqLspScore and :VqLspCost, asks the server to verify its state, replaces the settings
-- twice through update_settings (recording each workspace/didChangeConfiguration the client
-- sends), closes and reopens the file so that the server restores its state from a snapshot, and
-- writes everything it saw to VQ_TEST_OUT as JSON. Every wait is bounded; any error is recorded
-- and Neovim quits, so the test never hangs on this side.

local env = vim.env
vim.opt.runtimepath:prepend(env.VQ_TEST_PLUGIN)
local H = dofile(env.VQ_TEST_HELPERS)
local out, step, wait, count, request = H.out, H.step, H.wait, H.count, H.request

-- threshold 0: every paragraph gets a sentiment diagnostic, so their count follows the text
local SETTINGS = {
  modelPath = env.VQ_TEST_MODEL,
  device = "cpu",
  diagnostics = { sentimentThreshold = 0.0, surprise = true, surpriseThreshold = 0.0, maxSurpriseHints = 3,
                  typo = false, toneMinWords = 0 },
}

--- Record every workspace/didChangeConfiguration the client sends from now on.
local function record_configuration(client)
  out.sent_settings = {}
  local notify = client.notify
  client.notify = function(self, method, params)
    if method == "workspace/didChangeConfiguration" then
      table.insert(out.sent_settings, vim.deepcopy(params.settings))
    end
    return notify(self, method, params)
  end
end

local function snapshots(dir)
  return vim.fn.globpath(dir, "**/*", false, true)
end

H.after_startup(function()
  local vq = require("vq_lsp")
  vq.setup({ cmd = { env.VQ_TEST_SERVER }, settings = vim.deepcopy(SETTINGS) })
  step("setup")

  vim.cmd.edit(vim.fn.fnameescape(env.VQ_TEST_FILE))
  local buf = vim.api.nvim_get_current_buf()
  out.filetype = vim.bo[buf].filetype
  wait("the client to attach", function() return #vim.lsp.get_clients({ bufnr = buf, name = vq.name }) > 0 end)
  local client = vim.lsp.get_clients({ bufnr = buf, name = vq.name })[1]
  step("attached")

  wait("the first diagnostics", function() return count(buf, "sentiment") == 1 end)
  out.initial = H.dump_diagnostics(buf)
  step("initial diagnostics")

  -- Type: a line through the API, then a paragraph through the keyboard (insert mode).
  vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "", "I hated the ending, though it was short." })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(
    "Go<CR>The acting was wonderful<Esc>A and warm.<Esc>", true, false, true), "x", false)
  out.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  wait("diagnostics for three paragraphs", function() return count(buf, "sentiment") == 3 end)
  out.typed = H.dump_diagnostics(buf)
  out.shown = H.shown(buf)
  step("typed")

  local from = #out.messages
  vim.cmd("normal! G")
  vim.cmd("VqLspScore")
  wait(":VqLspScore's answer", function() return H.notified("^vq%-lsp:", from) end)
  out.score_message = H.notified("^vq%-lsp:", from)
  from = #out.messages
  vim.cmd("VqLspCost")
  wait(":VqLspCost's answer", function() return H.notified("^vq%-lsp:", from) end)
  out.cost_message = H.notified("^vq%-lsp:", from)
  step("commands")

  out.buf_version = vim.lsp.util.buf_versions[buf]
  out.scores = request(client, vq.DOCUMENT_SCORES, { uri = vim.uri_from_bufnr(buf) }, buf)
  out.verify = request(client, "workspace/executeCommand",
    { command = vq.VERIFY, arguments = { vim.uri_from_bufnr(buf) } }, buf)
  wait("the statusline score", function() return vq.statusline(buf) ~= "" end)
  out.statusline = vq.statusline(buf)
  local lens = H.expected_lens(out.scores)
  wait("the code lens with the document score", function()
    return vim.tbl_contains(H.lens_titles(buf), lens) and H.virtual_has(buf, lens)
  end)
  out.lens_titles = H.lens_titles(buf)
  out.lens_shown = H.virtual_has(buf, lens)
  from = #out.messages
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.lsp.codelens.run() -- the lens' command: vqLsp.verify
  wait("the code lens command's answer", function() return H.notified("^vq%-lsp verify:", from) end)
  out.lens_run_message = H.notified("^vq%-lsp verify:", from)
  step("requests")

  -- Replace the settings: surprise hints off, and a mistyped key the server warns about.
  record_configuration(client)
  local typo_warning = "diagnostics.tonMinWords: unknown setting"
  local first = vim.deepcopy(SETTINGS)
  first.diagnostics.surprise = false
  first.diagnostics.tonMinWords = 5
  vq.update_settings(first)
  wait("surprise hints to go after update_settings", function()
    return count(buf, "surprise") == 0 and count(buf, "sentiment") == 3
  end)
  wait("the server's warning about the mistyped key", function() return H.count_notified(typo_warning) > 0 end)
  out.after_settings = H.dump_diagnostics(buf)
  -- The same settings without the mistyped key (edited from settings(), as the README shows).
  local second = vq.settings()
  second.diagnostics.tonMinWords = nil
  vq.update_settings(second)
  request(client, vq.DOCUMENT_SCORES, { uri = vim.uri_from_bufnr(buf) }, buf) -- the server has read it
  out.settings_after_removal = vq.settings()
  out.typo_warnings = H.count_notified(typo_warning)
  step("settings")

  -- Close the file (its state goes to the snapshot cache), reopen it: the state is restored.
  vim.cmd("write")
  vim.cmd("bwipeout")
  wait("a snapshot in the cache", function() return #snapshots(env.VQ_LSP_CACHE_DIR) > 0 end)
  vim.cmd.edit(vim.fn.fnameescape(env.VQ_TEST_FILE))
  buf = vim.api.nvim_get_current_buf()
  wait("the client to attach again", function() return #vim.lsp.get_clients({ bufnr = buf, name = vq.name }) > 0 end)
  wait("diagnostics after reopening", function() return count(buf, "sentiment") == 3 end)
  out.reopened_scores = request(client, vq.DOCUMENT_SCORES, { uri = vim.uri_from_bufnr(buf) }, buf)
  from = #out.messages
  vim.cmd("VqLspCost")
  wait(":VqLspCost's answer after the restore", function() return H.notified("^vq%-lsp:", from) end)
  out.restored_cost_message = H.notified("^vq%-lsp:", from)
  step("restored")
end)
