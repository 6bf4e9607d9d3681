// An MCP server (stdio) whose tool list grows: each call of get_more_tools
// adds a tool get_extra_<n> and announces notifications/tools/list_changed.
// The gateway tests use it to check that an upstream's change reaches the
// gateway's clients.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer({ name: "growing", version: "1.0.0" });
let n = 0;
server.registerTool("get_more_tools", { description: "Adds a tool named get_extra_<n>." }, async () => {
  n++;
  const name = `get_extra_${n}`;
  server.registerTool(name, { description: `Extra tool ${n}.` }, async () => ({
    content: [{ type: "text", text: `extra ${n}` }],
  }));
  return { content: [{ type: "text", text: `added ${name}` }] };
});
await server.connect(new StdioServerTransport());
