// An airlock-gated function tool for the OpenAI Agents SDK
// (@openai/agents-core, which @openai/agents re-exports): the model's call
// is submitted to airlock, which decides it and runs it through its
// registry. A refusal is its typed error, whose sentence the model gets as
// the tool's output (the Agents SDK's default hides an error's message).
import { tool } from "@openai/agents-core";
import { AirlockError, type Client } from "./index.js";

/** Options of airlockAgentTool. */
export interface AirlockAgentToolOptions {
  /** The airlock tool to call, "server__tool". */
  tool: string;
  /** The name the model sees (default: the airlock tool's). */
  name?: string;
  description: string;
  /** The parameters (a zod object schema). */
  parameters: Parameters<typeof tool>[0]["parameters"];
  reason?: string;
  timeoutMs?: number;
}

/** An Agents SDK function tool whose every call goes through airlock; it returns the tool's result as JSON text. */
export function airlockAgentTool(client: Client, opts: AirlockAgentToolOptions) {
  return tool({
    name: opts.name ?? opts.tool,
    description: opts.description,
    parameters: opts.parameters,
    execute: async (input: unknown) => {
      const out = await client.do({ tool: opts.tool, arguments: input as Record<string, unknown>, reason: opts.reason }, opts.timeoutMs);
      return typeof out.result === "string" ? out.result : JSON.stringify(out.result);
    },
    errorFunction: (_ctx: unknown, err: unknown) =>
      err instanceof AirlockError ? err.message : "An error occurred while running the tool. Please try again.",
  } as Parameters<typeof tool>[0]);
}
