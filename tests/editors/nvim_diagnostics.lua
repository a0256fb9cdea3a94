-- Neovim 0.7 and later, headless: start `pooler lsp` as docs/editors.md sets it up, open a pool,
-- wait for its diagnostics and write them as JSON. The tests' own process tells which pool, where
-- the answer goes and which Python runs pooler.
local out = os.getenv("POOLER_NVIM_OUT")
local pool = os.getenv("POOLER_NVIM_POOL")
local python = os.getenv("POOLER_NVIM_PYTHON")

local client = vim.lsp.start_client({
  name = "pooler",
  cmd = { python, "-m", "pooler", "lsp" },
  root_dir = vim.fn.getcwd(),
})
vim.cmd("edit " .. vim.fn.fnameescape(pool))
local buf = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(buf, client)

local ok = vim.wait(120000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local found = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(found, { message = d.message, lnum = d.lnum, col = d.col, severity = d.severity })
end
local file = io.open(out, "w")
file:write(vim.fn.json_encode({ ok = ok, diagnostics = found }))
file:close()
vim.lsp.stop_client(client)
vim.wait(10000, function() return vim.lsp.client_is_stopped(client) end, 50)
vim.cmd("qa!")
