// airlockTool with the real Vercel AI SDK and its mock model against a real
// `airlock dev` (tests/typescript_sdk_test.go starts it; AIRLOCK_URL,
// AIRLOCK_TOKEN). The dev configuration denies demo__write_file under secret/.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import * as airlock from "../src/index.js";
import { airlockTool } from "../src/ai.js";

/** A model that calls toolName with input once, then answers with text. */
function callsOnce(toolName: string, input: object): MockLanguageModelV4 {
  let step = 0;
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  };
  return new MockLanguageModelV4({
    doGenerate: async () => (step++ === 0
      ? { finishReason: { unified: "tool-calls" as const, raw: undefined }, usage, warnings: [], content: [{ type: "tool-call", toolCallId: "call-1", toolName, input: JSON.stringify(input) }] }
      : { finishReason: { unified: "stop" as const, raw: undefined }, usage, warnings: [], content: [{ type: "text", text: "done" }] }),
  });
}

describe("the Vercel AI SDK", () => {
  const client = airlock.connectRest();
  const tools = {
    echo: airlockTool(client, { tool: "demo__echo", description: "Echoes text.", inputSchema: z.object({ text: z.string() }) }),
    write: airlockTool(client, { tool: "demo__write_file", description: "Writes a file.", inputSchema: z.object({ path: z.string(), content: z.string() }) }),
  };

  it("gets the result of a call airlock allowed and ran", async () => {
    const res = await generateText({ model: callsOnce("echo", { text: "hi from the model" }), tools, stopWhen: stepCountIs(3), prompt: "say hi" });
    const results = res.steps.flatMap((s) => s.content).filter((c) => c.type === "tool-result");
    assert.equal(results.length, 1, JSON.stringify(res.steps.map((s) => s.content)));
    assert.match(JSON.stringify(results[0]), /hi from the model/);
    assert.equal(res.text, "done");
  });

  it("hands the model airlock's sentence when the policy denies the call", async () => {
    const res = await generateText({ model: callsOnce("write", { path: "secret/key", content: "x" }), tools, stopWhen: stepCountIs(3), prompt: "write it" });
    const errors = res.steps.flatMap((s) => s.content).filter((c) => c.type === "tool-error");
    assert.equal(errors.length, 1, JSON.stringify(res.steps.map((s) => s.content)));
    const err = (errors[0] as { error: unknown }).error;
    assert.ok(err instanceof airlock.Denied, String(err));
    assert.match(err.message, /airlock's policy denied this call to demo__write_file/);
  });
});
