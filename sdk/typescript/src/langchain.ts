// An airlock-gated LangChain tool (for LangGraph agents and anything that
// takes a StructuredTool): the model's call is submitted to airlock, which
// decides it and runs it through its registry. A refusal is thrown as its
// typed error; LangGraph's ToolNode hands its sentence to the model.
import { tool } from "@langchain/core/tools";
import type { Client } from "./index.js";

/** Options of airlockLangChainTool. */
export interface AirlockLangChainToolOptions {
  /** The airlock tool to call, "server__tool". */
  tool: string;
  /** The name the model sees (default: the airlock tool's). */
  name?: string;
  description: string;
  /** The input schema (a zod object schema). */
  schema: Parameters<typeof tool>[1]["schema"];
  reason?: string;
  timeoutMs?: number;
}

/** A LangChain tool whose every call goes through airlock; it returns the tool's result as JSON text. */
export function airlockLangChainTool(client: Client, opts: AirlockLangChainToolOptions) {
  return tool(
    async (input: Record<string, unknown>) => {
      const out = await client.do({ tool: opts.tool, arguments: input, reason: opts.reason }, opts.timeoutMs);
      return typeof out.result === "string" ? out.result : JSON.stringify(out.result);
    },
    { name: opts.name ?? opts.tool, description: opts.description, schema: opts.schema } as Parameters<typeof tool>[1],
  );
}
