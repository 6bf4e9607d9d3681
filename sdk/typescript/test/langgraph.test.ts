// airlockLangChainTool in a real LangGraph ReAct agent with a scripted chat
// model, against a real `airlock dev` (AIRLOCK_URL, AIRLOCK_TOKEN; writes
// under secret/ are denied).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import * as airlock from "../src/index.js";
import { airlockLangChainTool } from "../src/langchain.js";

/** A chat model that calls one tool once, then answers "done". */
class CallsOnce extends BaseChatModel {
  private step = 0;
  constructor(private readonly toolName: string, private readonly input: Record<string, unknown>) { super({}); }
  _llmType() { return "calls-once"; }
  bindTools() { return this as any; }
  async _generate(_messages: BaseMessage[]): Promise<ChatResult> {
    const message = this.step++ === 0
      ? new AIMessage({ content: "", tool_calls: [{ id: "call-1", name: this.toolName, args: this.input, type: "tool_call" }] })
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
