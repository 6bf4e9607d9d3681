// An airlock-gated function tool for the OpenAI Agents SDK
// (@openai/agents-core, which @openai/agents re-exports): the model's call
// is submitted to airlock, which decides it and runs it through its
// registry. A refusal is its typed error, whose sentence the model gets as
// the tool's output (the Agents SDK's default hides an error's message).
//
// The tool's needsApproval is airlock: it submits the call and waits
// decideWithinMs for its outcome. A call airlock allows (or denies) at once
// runs (or is refused) without a stop; a call that waits for a person
// interrupts the run, as needsApproval does. Persist the run's state
// (result.state.toString()); once people decided — in this process or
// after a restart (RunState.fromString) — decideInterruptions approves or
// rejects each interruption with airlock's decision, and run(agent, state)
// resumes. The airlock call id is derived from the model's call id, so the
// call is found again after a restart and never submitted twice.
import { createHash } from "node:crypto";
import { tool, type RunState, type RunToolApprovalItem } from "@openai/agents-core";
import { AirlockError, check, type Client } from "./index.js";

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
  /** How long to wait for the outcome once the call may run (default: until it ends). */
  timeoutMs?: number;
  /** How long needsApproval waits for airlock to decide before the run stops for a person (default 3000). */
  decideWithinMs?: number;
}

/** The airlock call id of the model's call callId to the tool named name: the same before and after a restart. */
export function agentCallId(name: string, callId: string): string {
  return "oa-" + createHash("sha256").update(`${name.length}:${name}${callId}`).digest("hex").slice(0, 40);
}

/** An Agents SDK function tool whose every call goes through airlock; it returns the tool's result as JSON text. */
export function airlockAgentTool(client: Client, opts: AirlockAgentToolOptions) {
  const name = opts.name ?? opts.tool;
  const decideWithin = opts.decideWithinMs ?? 3000;
  const submit = (input: unknown, callId: string) =>
    client.submit({ callId: agentCallId(name, callId), tool: opts.tool, arguments: input as Record<string, unknown>, reason: opts.reason });
  return tool({
    name,
    description: opts.description,
    parameters: opts.parameters,
    needsApproval: async (_ctx: unknown, input: unknown, callId?: string) => {
      if (!callId) return false; // execute submits it
      // Submitting the same id again is harmless: a resumed run asks again.
      const id = await submit(input, callId);
      return (await client.await(id, decideWithin)).status === "pending";
    },
    execute: async (input: unknown, _ctx: unknown, details?: { toolCall?: { callId?: string } }) => {
      const callId = details?.toolCall?.callId;
      const out = callId
        ? check(await client.await(await submit(input, callId), opts.timeoutMs), opts.tool)
        : await client.do({ tool: opts.tool, arguments: input as Record<string, unknown>, reason: opts.reason }, opts.timeoutMs);
      return typeof out.result === "string" ? out.result : JSON.stringify(out.result);
    },
    errorFunction: (_ctx: unknown, err: unknown) =>
      err instanceof AirlockError ? err.message : "An error occurred while running the tool. Please try again.",
  } as Parameters<typeof tool>[0]);
}

/**
 * Decides each interruption of state with airlock's decision: it awaits the
 * call (at most timeoutMs each; default until it is decided) and approves
 * the interruption when the call may run, or rejects it with airlock's
 * sentence, which the model gets. An interruption still undecided when the
 * wait ends is left as it is. Returns how many are left undecided.
 */
export async function decideInterruptions(client: Client, state: RunState<any, any>, timeoutMs?: number): Promise<number> {
  let undecided = 0;
  for (const item of state.getInterruptions() as RunToolApprovalItem[]) {
    const callId = (item.rawItem as { callId?: string }).callId;
    if (!item.name || !callId) continue;
    const out = await client.await(agentCallId(item.name, callId), timeoutMs);
    if (out.status === "pending") {
      undecided++;
      continue;
    }
    try {
      check(out, item.name);
      state.approve(item);
    } catch (err) {
      state.reject(item, { message: (err as Error).message });
    }
  }
  return undecided;
}
