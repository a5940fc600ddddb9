-- Drives a headless Neovim through the "Add 'X' to the workspace dictionary" quick fix, for
-- tests/editors/test_nvim_dictionary.py: the plugin attached by `vim.lsp.enable("vq_lsp")` in a
-- workspace (a .git folder marks its root), a Markdown file with a typo, the code action asked for
-- and applied the way Neovim applies any (vim.lsp.util.apply_workspace_edit), and what follows:
-- the typo hint gone, the word list's buffer edited (not saved). Records to VQ_TEST_OUT as JSON.

local env = vim.env
vim.opt.runtimepath:prepend(env.VQ_TEST_PLUGIN)
local H = dofile(env.VQ_TEST_HELPERS)
local out, step, wait, count = H.out, H.step, H.wait, H.count

vim.lsp.config("vq_lsp", {
  settings = { vqLsp = { modelPath = env.VQ_TEST_MODEL, device = "cpu", diagnostics = { sentiment = false } } },
})
vim.lsp.enable("vq_lsp")

H.after_startup(function()
  vim.fn.writefile({ "I went to teh store because the milk was gone, and then I walked back home again." },
    env.VQ_TEST_FILE)
  vim.cmd.edit(vim.fn.fnameescape(env.VQ_TEST_FILE))
  local buf = vim.api.nvim_get_current_buf()
  wait("the client to attach", function() return #vim.lsp.get_clients({ bufnr = buf, name = "vq_lsp" }) > 0 end)
  local client = vim.lsp.get_clients({ bufnr = buf, name = "vq_lsp" })[1]
  out.root_dir = client.config.root_dir
  step("attached")

  wait("the typo hint", function() return count(buf, "typo") == 1 end)
  local typo
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.code == "typo" then typo = d.user_data.lsp end
  end
  step("typo")

  local actions = H.request(client, "textDocument/codeAction", {
    textDocument = { uri = vim.uri_from_bufnr(buf) }, range = typo.range,
    context = { diagnostics = { typo } },
  }, buf)
  out.titles = {}
  local add
  for _, action in ipairs(actions) do
    table.insert(out.titles, action.title)
    if action.title == "Add 'teh' to the workspace dictionary" then add = action end
  end
  if not add then error("no add-to-workspace-dictionary action", 0) end
  vim.lsp.util.apply_workspace_edit(add.edit, client.offset_encoding)
  step("applied")

  wait("the typo hint to go", function() return count(buf, "typo") == 0 end)
  local words = vim.fn.bufnr(vim.fs.joinpath(client.config.root_dir, ".vq-lsp-words.txt"))
  out.words_buffer = vim.api.nvim_buf_get_lines(words, 0, -1, false)
  out.words_modified = vim.bo[words].modified
  out.words_attached = #vim.lsp.get_clients({ bufnr = words, name = "vq_lsp" }) > 0
  step("gone")
end)
