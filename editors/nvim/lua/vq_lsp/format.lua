--- Readable text for the server's `vqLsp/documentScores` answer: the score line of `:VqLspScore`
--- and the lines of `:VqLspCost`. Kept apart from the client code so that every shape of the
--- answer's `cost` field (vq_lsp/documents/requests.py sets it) has one place that turns it into words.
---
--- The answer of `vqLsp.verify` (the code lens' command) gets one line too.
---
--- `cost` is one of: nil (no state built yet), an incremental update (`incremental_macs`, ...),
--- a full pass (`rebuild_seconds`, `tokens`), a restore from a snapshot (`restore_seconds`,
--- `tokens`); anything else is listed key by key, never as raw JSON.

local M = {}

--- The most probable label of a `scores` table and its probability.
function M.top(scores)
  local label, best
  for k, v in pairs(scores or {}) do
    if best == nil or v > best then
      label, best = k, v
    end
  end
  return label, best
end

local function present(v)
  return v ~= nil and v ~= vim.NIL
end

--- 1234567 -> "1.23M".
function M.human(n)
  for _, u in ipairs({ { 1e12, "T" }, { 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" } }) do
    if math.abs(n) >= u[1] then
      return ("%.2f%s"):format(n / u[1], u[2])
    end
  end
  return tostring(n)
end

local function ms(seconds)
  return type(seconds) == "number" and ("%.1f ms"):format(seconds * 1000) or "? ms"
end

--- "vq-lsp: positive 0.83 (document, 42 tokens, 3 paragraphs); paragraph: negative 0.61" for a
--- scores answer and a 0-based cursor line.
function M.score(res, line)
  local label, p = M.top(res.scores)
  if not label then
    return "vq-lsp: no score"
  end
  local text = ("vq-lsp: %s %.2f (document, %d tokens, %d paragraphs)"):format(label, p, res.tokens, #res.paragraphs)
  for _, para in ipairs(res.paragraphs or {}) do
    if line and para.range.start.line <= line and line <= para.range["end"].line then
      local pl, pp = M.top(para.scores)
      text = text .. ("; paragraph: %s %.2f"):format(pl, pp)
      break
    end
  end
  return text
end

local function counters(res)
  return ("updates %d, rebuilds %d, restores %d, evictions %d"):format(
    res.updates or 0, res.rebuilds or 0, res.restores or 0, res.evictions or 0)
end

local function scalar(v)
  if type(v) == "table" then
    if vim.islist(v) then
      return table.concat(vim.tbl_map(tostring, v), ", ")
    end
    return vim.inspect(v, { newline = " ", indent = "" })
  end
  if type(v) == "number" and math.floor(v) ~= v then
    return ("%.4g"):format(v)
  end
  return tostring(v)
end

--- Incremental MACs against a dense pass, worded the way it went: "32.0x fewer", or "1.1x more" when
--- an update replaced most of the document (a paste over all of it costs a little more than a dense pass).
function M.ratio(incremental, dense)
  if incremental <= dense then
    return ("%.1fx fewer"):format(dense / math.max(1, incremental))
  end
  return ("%.1fx more"):format(incremental / math.max(1, dense))
end

--- What the last update of the document cost, as lines of text (the first starts "vq-lsp:").
function M.cost(res)
  local c = res.cost
  if not present(c) then
    return "vq-lsp: no update yet"
  end
  if present(c.incremental_macs) then
    return table.concat({
      ("vq-lsp: last update of version %s: %s MACs incremental vs %s dense (%s), %.1f ms"):format(
        tostring(res.version), M.human(c.incremental_macs), M.human(c.dense_macs or 0),
        M.ratio(c.incremental_macs, c.dense_macs or 0), (c.seconds or 0) * 1000),
      ("dirty positions per layer: %s; relabelled %s, near ties %s; %s"):format(
        table.concat(vim.tbl_map(tostring, c.dirty_per_layer or {}), ", "), tostring(c.relabelled),
        tostring(c.near_ties), counters(res)),
    }, "\n")
  end
  if present(c.rebuild_seconds) then
    return table.concat({
      ("vq-lsp: full pass over %s tokens in %s (no incremental update since)"):format(
        tostring(c.tokens), ms(c.rebuild_seconds)),
      counters(res),
    }, "\n")
  end
  if present(c.restore_seconds) then
    return table.concat({
      ("vq-lsp: state of version %s restored from a snapshot: %s tokens in %s (no incremental update since)"):format(
        tostring(res.version), tostring(c.tokens), ms(c.restore_seconds)),
      counters(res),
    }, "\n")
  end
  local lines = { ("vq-lsp: last update of version %s:"):format(tostring(res.version)) }
  local keys = vim.tbl_keys(c)
  table.sort(keys)
  for _, k in ipairs(keys) do
    table.insert(lines, ("  %s: %s"):format(k:gsub("_", " "), scalar(c[k])))
  end
  table.insert(lines, counters(res))
  return table.concat(lines, "\n")
end

--- One line for the answer of the code lens' command (`vqLsp.verify`), and whether it passed.
function M.verify(res)
  local ok = res.codesEqual and res.tokensMatchText and not res.rebuilt
  local detail = ("max |diff| %.2e, %d mismatched codes, %s"):format(
    res.maxAbsDiff or 0, res.mismatchedCodes or 0, ms(res.seconds))
  if ok then
    return ("vq-lsp verify: the incremental state equals a full pass (%s)."):format(detail), true
  end
  local why = not res.tokensMatchText and "its tokens disagree with the text" or "its codes differ from a full pass"
  return ("vq-lsp verify: %s (%s); the state was rebuilt from the text."):format(why, detail), false
end

return M
