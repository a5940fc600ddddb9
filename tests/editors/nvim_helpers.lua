-- What the headless-Neovim drivers (nvim_drive.lua, nvim_enable_drive.lua) share: bounded waits,
-- the record written to VQ_TEST_OUT, and readers for what Neovim shows (diagnostics, the
-- extmarks that display them, code lenses). Loaded with dofile(); returns a table.

local H = {}

H.WAIT = tonumber(vim.env.VQ_TEST_WAIT_MS or "60000")
H.out = { steps = {}, messages = {} }

-- Commands answer through vim.notify: record what they say; and what the server says in
-- window/showMessage (Neovim 0.12 shows it with vim.notify, 0.11 echoes it).
vim.notify = function(msg, level)
  table.insert(H.out.messages, { msg = msg, level = level })
end
vim.lsp.handlers["window/showMessage"] = function(_, params)
  table.insert(H.out.messages, { msg = "LSP: " .. params.message, level = params.type })
  return vim.NIL
end

function H.step(name)
  table.insert(H.out.steps, name)
end

function H.wait(what, cond)
  if not vim.wait(H.WAIT, cond, 50) then
    error("timed out waiting for " .. what, 0)
  end
end

function H.dump_diagnostics(buf)
  local list = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(list, {
      lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
      severity = d.severity, message = d.message, code = d.code, source = d.source,
    })
  end
  return list
end

function H.count(buf, code)
  local n = 0
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.code == code then
      n = n + 1
    end
  end
  return n
end

function H.notified(pattern, from)
  for i = from + 1, #H.out.messages do
    if H.out.messages[i].msg:find(pattern) then
      return H.out.messages[i].msg
    end
  end
end

function H.count_notified(pattern)
  local n = 0
  for _, m in ipairs(H.out.messages) do
    if m.msg:find(pattern, 1, true) then
      n = n + 1
    end
  end
  return n
end

function H.request(client, method, params, buf)
  local done, result, err = false, nil, nil
  client:request(method, params, function(e, r)
    done, err, result = true, e, r
  end, buf)
  H.wait(method, function() return done end)
  if err then
    error(method .. " failed: " .. (err.message or vim.inspect(err)), 0)
  end
  return result
end

--- What the buffer's extmarks show, by kind: rows underlined by a diagnostic, rows with a
--- diagnostic sign, rows with diagnostic virtual text, and the text of virtual text/lines.
function H.shown(buf)
  local seen = { underline = {}, sign = {}, virtual_text = {}, virtual = {} }
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { details = true })) do
    local row, d = m[2], m[4]
    if d.hl_group and tostring(d.hl_group):find("^DiagnosticUnderline") then
      table.insert(seen.underline, { row = row, end_row = d.end_row, hl = d.hl_group })
    end
    if d.sign_text and d.sign_hl_group and tostring(d.sign_hl_group):find("^DiagnosticSign") then
      table.insert(seen.sign, { row = row, hl = d.sign_hl_group })
    end
    local texts = {}
    for _, chunk in ipairs(d.virt_text or {}) do
      table.insert(texts, chunk[1])
    end
    for _, line in ipairs(d.virt_lines or {}) do
      for _, chunk in ipairs(line) do
        table.insert(texts, chunk[1])
      end
    end
    if #texts > 0 then
      local text = table.concat(texts)
      table.insert(seen.virtual, { row = row, text = text })
      local hl = d.virt_text and d.virt_text[#d.virt_text] and d.virt_text[#d.virt_text][2]
      if type(hl) == "string" and hl:find("^DiagnosticVirtualText") then
        table.insert(seen.virtual_text, { row = row, hl = hl })
      end
    end
  end
  return seen
end

--- The titles of the code lenses Neovim holds for a buffer.
function H.lens_titles(buf)
  local titles = {}
  for _, lens in ipairs(require("vq_lsp.display").lenses(buf)) do
    if lens.command then
      table.insert(titles, lens.command.title)
    end
  end
  return titles
end

--- The title the server's code lens has for a documentScores answer (vq_lsp/hints/lsp.py).
function H.expected_lens(scores)
  local label, p = require("vq_lsp.format").top(scores.scores)
  return ("vq-lsp: %s %.2f (document) · verify"):format(label, p)
end

function H.virtual_has(buf, text)
  for _, v in ipairs(H.shown(buf).virtual) do
    if v.text:find(text, 1, true) then
      return true
    end
  end
  return false
end

--- Record the outcome, stop the servers and quit (whatever happened in `body`).
function H.run(body)
  local ok, failure = pcall(body)
  H.out.ok = ok
  H.out.error = (not ok) and tostring(failure) or nil
  local f = assert(io.open(vim.env.VQ_TEST_OUT, "w"))
  f:write(vim.json.encode(H.out))
  f:close()
  for _, client in ipairs(vim.lsp.get_clients()) do
    client:stop(true)
  end
  vim.cmd("qall!")
end

--- Run `body` once startup is over (vim.lsp.enable attaches on FileType events after VimEnter).
function H.after_startup(body)
  vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = vim.schedule_wrap(function()
    H.run(body)
  end) })
end

return H
