// airlockAgentTool in a real OpenAI Agents SDK run with a scripted model,
// against a real `airlock dev` (AIRLOCK_URL, AIRLOCK_TOKEN; writes under
// secret/ are denied).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Agent, run, Usage, type Model, type ModelRequest, type ModelResponse } from "@openai/agents-core";
import { z } from "zod";
import * as airlock from "../src/index.js";
import { airlockAgentTool } from "../src/openai-agents.js";

/** A model that calls one tool once, then answers "done". */
class CallsOnce implements Model {
  private step = 0;
  constructor(private readonly toolName: string, private readonly input: object) {}
  async getResponse(_req: ModelRequest): Promise<ModelResponse> {
    const output: ModelResponse["output"] = this.step++ === 0
      ? [{ type: "function_call", callId: "call-1", name: this.toolName, arguments: JSON.stringify(this.input), status: "completed" }]
      : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }];
    return { usage: new Usage(), output };
  }
  getStreamedResponse(): AsyncIterable<never> { throw new Error("not streamed"); }
}

describe("the OpenAI Agents SDK", () => {
  const client = airlock.connectRest();
  const tools = [
    airlockAgentTool(client, { tool: "demo__echo", name: "echo", description: "Echoes text.", parameters: z.object({ text: z.string() }) }),
    airlockAgentTool(client, { tool: "demo__write_file", name: "write", description: "Writes a file.", parameters: z.object({ path: z.string(), content: z.string() }) }),
  ];
  const toolOutputs = async (toolName: string, input: object) => {
    const agent = new Agent({ name: "tester", instructions: "use the tools", model: new CallsOnce(toolName, input), tools });
    const res = await run(agent, "go");
    assert.equal(res.finalOutput, "done");
    return res.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => JSON.stringify((i as { output: unknown }).output));
  };

  it("gets the result of a call airlock allowed and ran", async () => {
    const outs = await toolOutputs("echo", { text: "hi from the agents sdk" });
    assert.equal(outs.length, 1);
    assert.match(outs[0], /hi from the agents sdk/);
  });

  it("hands the model airlock's sentence when the policy denies the call", async () => {
    const outs = await toolOutputs("write", { path: "secret/key", content: "x" });
    assert.equal(outs.length, 1);
    assert.match(outs[0], /airlock's policy denied this call to demo__write_file/);
  });
});
