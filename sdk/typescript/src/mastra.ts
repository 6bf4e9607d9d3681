// An airlock-gated tool for Mastra (`@mastra/core`): the agent's call is
// submitted to airlock, which decides it (at once, or after a person) and
// runs it through its registry; the tool's result goes back to the model,
// and a refusal is thrown as its typed error, whose sentence Mastra hands
// the model as the tool's error.
import { createTool } from "@mastra/core/tools";
import type { Client } from "./index.js";

/** Options of airlockMastraTool. */
export interface AirlockMastraToolOptions<SCHEMA> {
  /** The airlock tool to call, "server__tool". */
  tool: string;
  /** The tool's id in Mastra (default: the airlock tool's). */
  id?: string;
  description: string;
  /** The input schema the model fills in (a zod object schema). */
  inputSchema: SCHEMA;
  /** Recorded as the call's stated reason. */
  reason?: string;
  /** How long to wait for the outcome (default: until it ends). */
  timeoutMs?: number;
}

/** A Mastra tool whose every call goes through airlock. */
export function airlockMastraTool<SCHEMA extends NonNullable<Parameters<typeof createTool>[0]["inputSchema"]>>(client: Client, opts: AirlockMastraToolOptions<SCHEMA>) {
  return createTool({
    id: opts.id ?? opts.tool,
    description: opts.description,
    inputSchema: opts.inputSchema,
    execute: async (input: unknown) => {
      const out = await client.do({ tool: opts.tool, arguments: input as Record<string, unknown>, reason: opts.reason }, opts.timeoutMs);
      return out.result;
    },
  });
}
