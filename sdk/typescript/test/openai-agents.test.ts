// airlockAgentTool in a real OpenAI Agents SDK run with a scripted model,
// against a real `airlock dev` (AIRLOCK_URL, AIRLOCK_TOKEN of agent
// AIRLOCK_TEST_REST_AGENT, AIRLOCK_TEST_ADMIN_TOKEN a reviewer; writes under
// secret/ are denied, other writes wait for a person).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Agent, run, RunState, Usage, type Model, type ModelRequest, type ModelResponse } from "@openai/agents-core";
import { z } from "zod";
import * as airlock from "../src/index.js";
import { decide } from "./reviewer.js";
import { agentCallId, airlockAgentTool, decideInterruptions } from "../src/openai-agents.js";

/** A model that calls one tool once (a fresh call id each time), then answers "done"; answered is where a resumed run starts. */
class CallsOnce implements Model {
  private step: number;
  constructor(private readonly toolName: string, private readonly input: object, answered = false) { this.step = answered ? 1 : 0; }
  async getResponse(_req: ModelRequest): Promise<ModelResponse> {
    const output: ModelResponse["output"] = this.step++ === 0
      ? [{ type: "function_call", callId: "call-" + randomUUID(), name: this.toolName, arguments: JSON.stringify(this.input), status: "completed" }]
      : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }];
    return { usage: new Usage(), output };
  }
  getStreamedResponse(): AsyncIterable<never> { throw new Error("not streamed"); }
}

const toolsOf = (client: airlock.Client) => [
  airlockAgentTool(client, { tool: "demo__echo", name: "echo", description: "Echoes text.", parameters: z.object({ text: z.string() }) }),
  // Short: a write waits for a person, and the run should stop soon.
  airlockAgentTool(client, { tool: "demo__write_file", name: "write", description: "Writes a file.", parameters: z.object({ path: z.string(), content: z.string() }), decideWithinMs: 500 }),
];
const agentWith = (model: Model, client: airlock.Client) => new Agent({ name: "tester", instructions: "use the tools", model, tools: toolsOf(client) });
const outputsOf = (res: { newItems: Array<{ type: string }> }) =>
  res.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => JSON.stringify((i as unknown as { output: unknown }).output));

describe("the OpenAI Agents SDK", () => {
  const client = airlock.connectRest();
  const toolOutputs = async (toolName: string, input: object) => {
    const res = await run(agentWith(new CallsOnce(toolName, input), client), "go");
    assert.equal(res.finalOutput, "done");
    return outputsOf(res);
  };

  it("gets the result of a call airlock allowed and ran, without a stop", async () => {
    const outs = await toolOutputs("echo", { text: "hi from the agents sdk" });
    assert.equal(outs.length, 1);
    assert.match(outs[0], /hi from the agents sdk/);
  });

  it("hands the model airlock's sentence when the policy denies the call", async () => {
    const outs = await toolOutputs("write", { path: "secret/key", content: "x" });
    assert.equal(outs.length, 1);
    assert.match(outs[0], /airlock's policy denied this call to demo__write_file/);
  });

  for (const [verb, want] of [["approve", /bytes.{1,6}14.{1,10}path.{1,6}ts-agents-approve-/], ["reject", /rejected this call to write: not this file/]] as const) {
    it(`a call waiting for a person interrupts the run, which resumes after a restart once they ${verb}`, async () => {
      const path = `ts-agents-${verb}-${randomUUID().slice(0, 8)}.txt`;
      const first = await run(agentWith(new CallsOnce("write", { path, content: "from the agent" }), client), "go");
      assert.equal(first.interruptions.length, 1, "the run did not stop for a person");
      const saved = first.state.toString();
      const modelCallId = (first.interruptions[0].rawItem as { callId: string }).callId;

      // A restart: a new client, agent and model; the state comes back from its string.
      const fresh = airlock.connectRest();
      const agent = agentWith(new CallsOnce("write", { path, content: "from the agent" }, true), fresh);
      const state = await RunState.fromString(agent, saved);
      assert.equal(await decideInterruptions(fresh, state, 200), 1, "an undecided call was decided");
      await decide(agentCallId("write", modelCallId), verb, "not this file");
      assert.equal(await decideInterruptions(fresh, state, 30_000), 0);
      const res = await run(agent, state);
      assert.equal(res.finalOutput, "done");
      const outs = outputsOf(res);
      assert.equal(outs.length, 1, JSON.stringify(res.newItems));
      assert.match(outs[0], want, outs[0]);
    });
  }
});
