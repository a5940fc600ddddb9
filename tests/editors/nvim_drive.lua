-- Drives a headless Neovim through the vq_lsp plugin, for tests/editors/test_nvim.py.
-- Reads its parameters from the environment (VQ_TEST_*), opens a Markdown file, types two new
-- paragraphs, waits for the diagnostics that follow, runs :VqLspScore and :VqLspCost, asks the
-- server to verify its state, switches surprise hints off through update_settings, and writes
-- everything it saw to VQ_TEST_OUT as JSON. Every wait is bounded; any error is recorded and
-- Neovim quits, so the test never hangs on this side.

local env = vim.env
local WAIT = tonumber(env.VQ_TEST_WAIT_MS or "60000")
local out = { steps = {}, messages = {} }

vim.opt.runtimepath:prepend(env.VQ_TEST_PLUGIN)

-- :VqLspScore and :VqLspCost answer through vim.notify: record what they say.
vim.notify = function(msg, level)
  table.insert(out.messages, { msg = msg, level = level })
end

local function step(name)
  table.insert(out.steps, name)
end

local function wait(what, cond)
  if not vim.wait(WAIT, cond, 50) then
    error("timed out waiting for " .. what, 0)
  end
end

local function dump_diagnostics(buf)
  local list = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(list, {
      lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
      severity = d.severity, message = d.message, code = d.code, source = d.source,
    })
  end
  return list
end

local function count(buf, code)
  local n = 0
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.code == code then
      n = n + 1
    end
  end
  return n
end

local function notified(pattern, from)
  for i = from + 1, #out.messages do
    if out.messages[i].msg:find(pattern) then
      return out.messages[i].msg
    end
  end
end

local function request(client, method, params, buf)
  local done, result, err = false, nil, nil
  client:request(method, params, function(e, r)
    done, err, result = true, e, r
  end, buf)
  wait(method, function() return done end)
  if err then
    error(method .. " failed: " .. (err.message or vim.inspect(err)), 0)
  end
  return result
end

local function main()
  local ok, failure = pcall(function()
    local vq = require("vq_lsp")
    vq.setup({
      cmd = { env.VQ_TEST_SERVER },
      settings = {
        modelPath = env.VQ_TEST_MODEL,
        device = "cpu",
        -- threshold 0: every paragraph gets a sentiment diagnostic, so their count follows the text
        diagnostics = { sentimentThreshold = 0.0, surprise = true, surpriseThreshold = 0.0, maxSurpriseHints = 3,
                        typo = false, toneMinWords = 0 },
      },
    })
    step("setup")

    vim.cmd.edit(vim.fn.fnameescape(env.VQ_TEST_FILE))
    local buf = vim.api.nvim_get_current_buf()
    out.filetype = vim.bo[buf].filetype
    wait("the client to attach", function() return #vim.lsp.get_clients({ bufnr = buf, name = vq.name }) > 0 end)
    local client = vim.lsp.get_clients({ bufnr = buf, name = vq.name })[1]
    step("attached")

    wait("the first diagnostics", function() return count(buf, "sentiment") == 1 end)
    out.initial = dump_diagnostics(buf)
    step("initial diagnostics")

    -- Type: a line through the API, then a paragraph through the keyboard (insert mode).
    vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "", "I hated the ending, though it was short." })
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(
      "Go<CR>The acting was wonderful<Esc>A and warm.<Esc>", true, false, true), "x", false)
    out.lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    wait("diagnostics for three paragraphs", function() return count(buf, "sentiment") == 3 end)
    out.typed = dump_diagnostics(buf)
    step("typed")

    local from = #out.messages
    vim.cmd("normal! G")
    vim.cmd("VqLspScore")
    wait(":VqLspScore's answer", function() return notified("^vq%-lsp:", from) end)
    out.score_message = notified("^vq%-lsp:", from)
    from = #out.messages
    vim.cmd("VqLspCost")
    wait(":VqLspCost's answer", function() return notified("^vq%-lsp:", from) end)
    out.cost_message = notified("^vq%-lsp:", from)
    step("commands")

    out.buf_version = vim.lsp.util.buf_versions[buf]
    out.scores = request(client, vq.DOCUMENT_SCORES, { uri = vim.uri_from_bufnr(buf) }, buf)
    out.verify = request(client, "workspace/executeCommand",
      { command = vq.VERIFY, arguments = { vim.uri_from_bufnr(buf) } }, buf)
    wait("the statusline score", function() return vq.statusline(buf) ~= "" end)
    out.statusline = vq.statusline(buf)
    step("requests")

    vq.update_settings({ diagnostics = { surprise = false } })
    wait("surprise hints to go after update_settings", function()
      return count(buf, "surprise") == 0 and count(buf, "sentiment") == 3
    end)
    out.after_settings = dump_diagnostics(buf)
    step("settings")
  end)

  out.ok = ok
  out.error = (not ok) and tostring(failure) or nil
  local f = assert(io.open(env.VQ_TEST_OUT, "w"))
  f:write(vim.json.encode(out))
  f:close()
  for _, client in ipairs(vim.lsp.get_clients()) do
    client:stop(true)
  end
  vim.cmd("qall!")
end

-- Run once startup is over (vim.lsp.enable attaches on FileType events after VimEnter).
vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = vim.schedule_wrap(main) })
