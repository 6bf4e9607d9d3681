// airlockLangChainTool in a real LangGraph ReAct agent with a scripted chat
// model, against a real `airlock dev` (AIRLOCK_URL, AIRLOCK_TOKEN; writes
// under secret/ are denied).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import * as airlock from "../src/index.js";
import { decide } from "./reviewer.js";
import { airlockLangChainTool } from "../src/langchain.js";
import { airlockToolNode, type AirlockInterrupt } from "../src/langgraph.js";

/** A chat model that calls one tool once, then answers "done". */
class CallsOnce extends BaseChatModel {
  private step = 0;
  constructor(private readonly toolName: string, private readonly input: Record<string, unknown>) { super({}); }
  _llmType() { return "calls-once"; }
  bindTools() { return this as any; }
  async _generate(_messages: BaseMessage[]): Promise<ChatResult> {
    const message = this.step++ === 0
      ? new AIMessage({ content: "", tool_calls: [{ id: "call-" + randomUUID(), name: this.toolName, args: this.input, type: "tool_call" }] })
      : new AIMessage("done");
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

describe("LangGraph", () => {
  const client = airlock.connectRest();
  const tools = [
    airlockLangChainTool(client, { tool: "demo__echo", name: "echo", description: "Echoes text.", schema: z.object({ text: z.string() }) }),
    airlockLangChainTool(client, { tool: "demo__write_file", name: "write", description: "Writes a file.", schema: z.object({ path: z.string(), content: z.string() }) }),
  ];

  const toolMessages = async (toolName: string, input: Record<string, unknown>) => {
    const agent = createReactAgent({ llm: new CallsOnce(toolName, input), tools });
    const res = await agent.invoke({ messages: [{ role: "user", content: "go" }] });
    return res.messages.filter((m: BaseMessage) => m instanceof ToolMessage) as ToolMessage[];
  };

  it("gets the result of a call airlock allowed and ran", async () => {
    const msgs = await toolMessages("echo", { text: "hi from langgraph" });
    assert.equal(msgs.length, 1);
    assert.match(String(msgs[0].content), /hi from langgraph/);
  });

  it("hands the model airlock's sentence when the policy denies the call", async () => {
    const msgs = await toolMessages("write", { path: "secret/key", content: "x" });
    assert.equal(msgs.length, 1);
    assert.match(String(msgs[0].content), /airlock's policy denied this call to demo__write_file/);
  });
});

describe("a LangGraph graph with airlock's gated tool node", () => {
  const client = airlock.connectRest();
  /** agent → tools (airlock) → agent, checkpointed so an interrupt can be resumed. */
  const graphOf = (llm: CallsOnce) => new StateGraph(MessagesAnnotation)
    .addNode("agent", async (state) => ({ messages: [await llm.invoke(state.messages)] }))
    .addNode("tools", airlockToolNode(client, { tools: { echo: "demo__echo", write: "demo__write_file" }, decideWithinMs: 500 }))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END))
    .addEdge("tools", "agent")
    .compile({ checkpointer: new MemorySaver() });
  const interrupts = (res: object) => (res as { __interrupt__?: Array<{ value: AirlockInterrupt }> }).__interrupt__;
  const toolText = (messages: BaseMessage[]) => messages.filter((m) => m instanceof ToolMessage).map((m) => String(m.content));

  it("answers a call airlock allowed without an interrupt", async () => {
    const res = await graphOf(new CallsOnce("echo", { text: "hi from the node" })).invoke(
      { messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: randomUUID() } });
    assert.equal(interrupts(res), undefined);
    assert.match(toolText(res.messages).join(), /hi from the node/);
  });

  for (const [verb, want] of [["approve", /bytes.{1,6}14.{1,10}path.{1,6}ts-graph-approve-/], ["reject", /rejected this call to demo__write_file: not this file/]] as const) {
    it(`interrupts for a call waiting for a person, and resumes with the outcome once they ${verb}`, async () => {
      const path = `ts-graph-${verb}-${randomUUID().slice(0, 8)}.txt`;
      const graph = graphOf(new CallsOnce("write", { path, content: "from the graph" }));
      const config = { configurable: { thread_id: randomUUID() } };
      const first = await graph.invoke({ messages: [{ role: "user", content: "go" }] }, config);
      const stops = interrupts(first) ?? [];
      assert.equal(stops.length, 1, "the graph did not interrupt for a person");
      const [waiting] = stops[0].value.airlock;
      assert.equal(waiting.tool, "demo__write_file");
      await decide(waiting.callId, verb, "not this file");
      const res = await graph.invoke(new Command({ resume: "decided" }), config);
      assert.equal(interrupts(res), undefined);
      const texts = toolText(res.messages);
      assert.equal(texts.length, 1, JSON.stringify(texts));
      assert.match(texts[0], want, texts[0]);
      assert.equal(String(res.messages.at(-1)?.content), "done");
    });
  }
});
