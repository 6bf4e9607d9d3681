// An airlock-gated tool for the Vercel AI SDK (`ai`, v7): the model's call
// is submitted to airlock, which decides it (at once, or after a person)
// and runs it through its registry; the tool's result goes back to the
// model, and a refusal is thrown as its typed error, whose sentence the AI
// SDK hands the model as the tool's error.
import { tool, type FlexibleSchema, type Tool } from "ai";
import type { Client } from "./index.js";

/** Options of airlockTool. */
export interface AirlockToolOptions<INPUT> {
  /** The airlock tool to call, "server__tool". */
  tool: string;
  description?: string;
  /** The input schema the model fills in (a zod schema or jsonSchema()). */
  inputSchema: FlexibleSchema<INPUT>;
  /** Recorded as the call's stated reason. */
  reason?: string;
  /** How long to wait for the outcome (default: until it ends). */
  timeoutMs?: number;
}

/** A Vercel AI SDK tool whose every call goes through airlock. */
export function airlockTool<INPUT extends Record<string, unknown>>(client: Client, opts: AirlockToolOptions<INPUT>): Tool<INPUT, unknown> {
  return tool<INPUT, unknown, Record<string, unknown>>({
    description: opts.description,
    inputSchema: opts.inputSchema,
    execute: async (input: INPUT) => {
      const out = await client.do({ tool: opts.tool, arguments: input, reason: opts.reason }, opts.timeoutMs);
      return out.result;
    },
  });
}
