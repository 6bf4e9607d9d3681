// A LangGraph node that gates the last AI message's tool calls through
// airlock with interrupts: each call is submitted to airlock, which decides
// it and runs it through its registry. A call airlock decides at once is
// answered at once; while any waits for a person the node interrupts (its
// payload lists them). Resumed (new Command({resume: ...}) with the same
// thread, after the reviewers decided), the node awaits the outcomes and
// answers each call with a ToolMessage: the tool's result, or airlock's
// sentence when it did not run. The airlock call id is derived from the
// model's tool call id, so the node that runs again on resume finds the
// same calls instead of submitting new ones.
import { createHash } from "node:crypto";
import { ToolMessage, type AIMessage, type BaseMessage } from "@langchain/core/messages";
import { interrupt } from "@langchain/langgraph";
import { check, type Client, type Outcome } from "./index.js";

/** Options of airlockToolNode. */
export interface AirlockToolNodeOptions {
  /** The airlock tool each model-facing tool name calls, e.g. {write: "demo__write_file"}. */
  tools: Record<string, string>;
  /** How long to wait for airlock to decide before interrupting for a person (default 3000). */
  decideWithinMs?: number;
  /** How long a resumed node waits for the outcomes (default: until they end). */
  timeoutMs?: number;
  reason?: string;
}

/** What the node's interrupt carries: the calls that wait for a person. */
export interface AirlockInterrupt {
  airlock: Array<{ callId: string; tool: string; arguments: Record<string, unknown> }>;
}

/** The airlock call id of the model's tool call toolCallId to name. */
export function graphCallId(name: string, toolCallId: string): string {
  return "lg-" + createHash("sha256").update(`${name.length}:${name}${toolCallId}`).digest("hex").slice(0, 40);
}

/** A node for a graph whose state has `messages` (MessagesAnnotation): it answers the last AI message's tool calls. */
export function airlockToolNode(client: Client, opts: AirlockToolNodeOptions) {
  return async (state: { messages: BaseMessage[] }): Promise<{ messages: ToolMessage[] }> => {
    const last = state.messages[state.messages.length - 1] as AIMessage;
    const calls = (last?.tool_calls ?? []).map((tc) => {
      const tool = opts.tools[tc.name];
      return { tc, tool, callId: graphCallId(tc.name, tc.id ?? "") };
    });
    const outs: Array<Outcome | string> = await Promise.all(calls.map(async ({ tc, tool, callId }) => {
      if (!tool) return `There is no tool ${tc.name}: use one of ${Object.keys(opts.tools).join(", ")}.`;
      // Submitting the same id again is harmless: on resume the node runs again.
      await client.submit({ callId, tool, arguments: tc.args, reason: opts.reason });
      return client.await(callId, opts.decideWithinMs ?? 3000);
    }));
    const waiting = calls.filter((_, i) => typeof outs[i] !== "string" && (outs[i] as Outcome).status === "pending");
    if (waiting.length > 0) {
      // Throws the first time; returns the resume value once resumed.
      interrupt<AirlockInterrupt>({ airlock: waiting.map(({ tc, tool, callId }) => ({ callId, tool, arguments: tc.args })) });
      await Promise.all(calls.map(async ({ callId }, i) => {
        if (typeof outs[i] !== "string" && (outs[i] as Outcome).status === "pending") outs[i] = await client.await(callId, opts.timeoutMs);
      }));
    }
    return {
      messages: calls.map(({ tc, tool }, i) => new ToolMessage({ tool_call_id: tc.id ?? "", name: tc.name, content: answer(outs[i], tool) })),
    };
  };
}

/** The tool's result as text, or the sentence saying why it did not run. */
function answer(out: Outcome | string, tool: string): string {
  if (typeof out === "string") return out;
  try {
    const done = check(out, tool);
    return typeof done.result === "string" ? done.result : JSON.stringify(done.result);
  } catch (err) {
    return (err as Error).message;
  }
}
