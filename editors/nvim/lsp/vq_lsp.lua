-- The vq-lsp client configuration for Neovim 0.11+: with editors/nvim on the runtimepath,
-- `vim.lsp.enable("vq_lsp")` alone starts `vq-lsp` for prose filetypes; `vim.lsp.config("vq_lsp", {...})`
-- overrides any part of it (cmd, filetypes, settings = { vqLsp = {...} }). See editors/nvim/README.md.
return require("vq_lsp").base_config()
