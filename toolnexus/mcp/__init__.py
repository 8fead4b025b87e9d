"""The MCP client: everything between a toolkit and the MCP servers its manifest names.

- `spec`: one `mcp_servers:` entry, checked and frozen (hot reload keeps a session whose spec
  is unchanged).
- `server`: the live connection to one server (stdio or streamable HTTP), its restarts, tool
  list and status.
- `stdio`, `http`: the bounded, screened transports.
- `call`, `tasks`: calling a tool (progress, timeouts, the tasks API).
- `callbacks`: what servers ask of the client (elicitation, sampling, logging, roots).
- `convert`: MCP content and schemas to toolnexus `Result`s and `Tool`s.
- `auth`, `login`, `tokens`: OAuth 2.1 for HTTP servers, the browser login, the token store.
- `namespace`: `.mcp.json` tool names that two servers share.

`import mcp` (the SDK) costs about a second: nothing here imports it until a server connects.
"""
