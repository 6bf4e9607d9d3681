// An MCP client built with the TypeScript SDK that calls a gateway
// endpoint's run_code tool once with a script and prints the result as one
// JSON line. It waits as long as progress keeps coming (a script's call may
// wait for a person), as a host configured for long tool calls does.
//
// Usage: node run-code-client.mjs URL TOKEN CODE
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, code] = process.argv.slice(2);
const client = new Client({ name: "run-code-client", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const { tools } = await client.listTools();
const runCode = tools.find((t) => t.name === "run_code");
console.log(JSON.stringify({ connected: true, runCode: !!runCode, description: runCode?.description ?? "" }));
try {
  const res = await client.callTool({ name: "run_code", arguments: { code } }, undefined, {
    onprogress: () => {},
    resetTimeoutOnProgress: true,
    timeout: 60_000,
    maxTotalTimeout: 180_000,
  });
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text);
  console.log(JSON.stringify({ isError: !!res.isError, text, structured: res.structuredContent ?? null, meta: res._meta ?? {} }));
} catch (err) {
  console.log(JSON.stringify({ error: `${err.code ?? ""} ${err.message}` }));
}
await client.close();
