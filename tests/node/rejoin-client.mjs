// An MCP client built with the TypeScript SDK at its default options (a
// request times out after 60 s; progress does not reset that), as most
// hosts use it. It connects to a gateway endpoint and, for every line
// "call" on stdin, calls one tool with the same arguments in the same
// session and prints the result (or the error) as one JSON line. The
// gateway tests use it to show that a call waiting for approval longer
// than the client waits is answered "waiting for approval", and that the
// same call repeated returns the outcome.
//
// Usage: node rejoin-client.mjs URL TOKEN TOOL ARGS_JSON
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, argsJSON] = process.argv.slice(2);
const client = new Client({ name: "rejoin-client", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
console.log(JSON.stringify({ connected: transport.sessionId ?? "" }));
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() !== "call") continue;
  const started = Date.now();
  try {
    const res = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) });
    const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
    console.log(JSON.stringify({ isError: !!res.isError, text, meta: res._meta ?? {}, ms: Date.now() - started }));
  } catch (err) {
    console.log(JSON.stringify({ error: `${err.code ?? ""} ${err.message}`, ms: Date.now() - started }));
  }
}
await client.close();
