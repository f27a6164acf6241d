import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import { envSchema } from "../../config/env.ts";
import { firstLine } from "../../shared/async.ts";
import type { ChatOutcome, ResolvedQuestion } from "./engine.ts";
import {
  activityFact,
  balancesFact,
  counterpartiesFact,
  factorsFact,
  incomeFact,
  largestTransfersFact,
  loanFact,
  passportFact,
  type Source,
  scoresFact,
  type WalletReader,
} from "./facts.ts";
import { readPeriod } from "./language.ts";

/**
 * Model mode: an OpenAI-compatible chat-completions endpoint phrases the answer, calling the same
 * read-only fact functions as the deterministic engine (offered as tools). Guards:
 * - only the tools below exist; a call to any other name is refused and never run;
 * - tools only read indexed wallet data: nothing can write, pay, or read configuration or keys
 *   (the model's context holds the question, the wallets and tool results, nothing else);
 * - every figure in the model's answer must be a figure of a tool result (or of the question);
 *   otherwise, or on any failure or after the timeout, the deterministic answer is given instead;
 * - an answer with anything shaped like a private key (64 hex digits) is discarded.
 */

export type ChatModelSettings = { url: string; model: string; apiKey?: string; timeoutMs: number };

/** The model endpoint from the environment (config/env.ts), or null: the deterministic engine only. */
export function chatModelSettings(source: NodeJS.ProcessEnv = process.env): ChatModelSettings | null {
  const env = envSchema
    .pick({ CHAT_MODEL_URL: true, CHAT_MODEL: true, CHAT_MODEL_API_KEY: true, CHAT_MODEL_TIMEOUT_MS: true })
    .parse(source);
  if (!env.CHAT_MODEL_URL) return null;
  const base = env.CHAT_MODEL_URL.replace(/\/+$/, "");
  return {
    url: base.endsWith("/chat/completions") ? base : `${base}/chat/completions`,
    model: env.CHAT_MODEL ?? "default",
    ...(env.CHAT_MODEL_API_KEY ? { apiKey: env.CHAT_MODEL_API_KEY } : {}),
    timeoutMs: env.CHAT_MODEL_TIMEOUT_MS,
  };
}

/** Model exchanges per question: tool rounds, then the answer. */
const MAX_MODEL_ROUNDS = 4;

const address = { type: "string", pattern: "^0x[0-9a-fA-F]{40}$", description: "Wallet address" } as const;
const onlyAddress = {
  type: "object",
  properties: { address },
  required: ["address"],
  additionalProperties: false,
} as const;
const addressArgs = z.object({ address: addressSchema });

type Tool = {
  description: string;
  parameters: Record<string, unknown>;
  run: (reader: WalletReader, args: unknown) => Promise<{ fact: unknown; sources: Source[] }>;
};

/** The tools offered to the model: the engine's read-only fact functions, nothing else. */
const CHAT_TOOLS: Record<string, Tool> = {
  wallet_scores: {
    description:
      "Financial health and reputation scores, recommendation, whether trustworthy, rationale, positives and concerns",
    parameters: onlyAddress,
    run: (r, a) => scoresFact(r, addressArgs.parse(a).address),
  },
  wallet_score_factors: {
    description:
      "Every scoring factor with its points and maximum, and the signals behind them (why a score is low, what would raise it)",
    parameters: onlyAddress,
    run: (r, a) => factorsFact(r, addressArgs.parse(a).address),
  },
  wallet_income: {
    description:
      "Income label, verified recurring income, recurring payers with cadence, irregular monthly estimate, excluded inflow",
    parameters: onlyAddress,
    run: (r, a) => incomeFact(r, addressArgs.parse(a).address),
  },
  wallet_loan_capacity: {
    description: "Suggested loan range in USD, its confidence and basis",
    parameters: onlyAddress,
    run: (r, a) => loanFact(r, addressArgs.parse(a).address),
  },
  wallet_balances: {
    description: "USDT and USDC balances",
    parameters: onlyAddress,
    run: (r, a) => balancesFact(r, addressArgs.parse(a).address),
  },
  wallet_activity: {
    description:
      'Inflow, outflow and transfer counts over a period ("last 3 months", "since March", "in October", "last 30 days", "2026-10")',
    parameters: {
      type: "object",
      properties: { address, period: { type: "string" } },
      required: ["address", "period"],
      additionalProperties: false,
    },
    run: async (r, a) => {
      const args = z.object({ address: addressSchema, period: z.string().max(100) }).parse(a);
      const period =
        readPeriod(args.period, await r.asOf(args.address)) ?? readPeriod("last 3 months", await r.asOf(args.address))!;
      return activityFact(r, args.address, period);
    },
  },
  wallet_largest_transfers: {
    description: "The wallet's largest transfers over the last 365 days",
    parameters: {
      type: "object",
      properties: {
        address,
        direction: { type: "string", enum: ["in", "out", "both"] },
        limit: { type: "integer", minimum: 1, maximum: 20 },
      },
      required: ["address"],
      additionalProperties: false,
    },
    run: (r, a) => {
      const args = z
        .object({
          address: addressSchema,
          direction: z.enum(["in", "out", "both"]).optional(),
          limit: z.number().int().min(1).max(20).optional(),
        })
        .parse(a);
      return largestTransfersFact(r, args.address, args);
    },
  },
  wallet_top_counterparties: {
    description: "The wallet's top counterparties by volume",
    parameters: {
      type: "object",
      properties: { address, limit: { type: "integer", minimum: 1, maximum: 20 } },
      required: ["address"],
      additionalProperties: false,
    },
    run: (r, a) => {
      const args = z.object({ address: addressSchema, limit: z.number().int().min(1).max(20).optional() }).parse(a);
      return counterpartiesFact(r, args.address, args);
    },
  },
  wallet_passport: {
    description: "The wallet's valid passport (on-chain attestation), or none",
    parameters: onlyAddress,
    run: (r, a) => passportFact(r, addressArgs.parse(a).address),
  },
};

export type ToolCallRecord = { tool: string; arguments: unknown; refused: boolean; result: unknown };
export type ModelEngine = {
  name: "model" | "deterministic";
  model: string | null;
  fallbackReason: string | null;
  toolCalls: number;
  refusedTools: string[];
};

type Message =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };
type ToolCall = { id: string; type: "function"; function: { name: string; arguments: string } };

const completionSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullable().optional(),
          tool_calls: z
            .array(
              z.object({
                id: z.string(),
                type: z.string().optional(),
                function: z.object({ name: z.string(), arguments: z.string().optional() }),
              }),
            )
            .optional(),
        }),
      }),
    )
    .min(1),
});

/** Something shaped like a private key or a secret hash: never in an answer. */
const SECRET_SHAPED = /(?:0x)?[0-9a-fA-F]{64}/;

/** Every number written in a text, as its canonical value (commas dropped; addresses, list markers and hex removed). */
function figuresIn(text: string): number[] {
  const cleaned = text
    .replace(/0x[0-9a-fA-F]+/g, " ")
    .replace(/^\s*\d{1,2}[.)]\s/gm, " ")
    .replace(/(?<=\s|^)\d{1,2}[.)]\s/g, " ");
  return [...cleaned.matchAll(/\d[\d,]*(?:\.\d+)?/g)]
    .map((m) => Number(m[0].replace(/,/g, "")))
    .filter((n) => Number.isFinite(n));
}

const canonical = (n: number) => [String(Number(n.toFixed(2))), String(Math.round(n)), String(Number(n.toFixed(1)))];

/** The figures a tool result (or the question) allows an answer to state: each value, rounded to 0, 1 or 2 decimals. */
function allowedFigures(values: unknown[], texts: string[] = []): Set<string> {
  const allowed = new Set<string>();
  const visit = (v: unknown) => {
    if (typeof v === "number") for (const c of canonical(v)) allowed.add(c);
    else if (typeof v === "string") for (const c of figuresIn(v).flatMap(canonical)) allowed.add(c);
    else if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === "object") Object.values(v).forEach(visit);
  };
  values.forEach(visit);
  texts.forEach(visit);
  return allowed;
}

/** Figures of `answer` that no tool result states. */
function unsupportedFigures(answer: string, allowed: Set<string>): number[] {
  return figuresIn(answer).filter((n) => !allowed.has(String(Number(n.toFixed(2)))));
}

function systemPrompt(resolved: ResolvedQuestion, asOf: string | null): string {
  return [
    "You answer questions about Celo wallets for a lender, from the service's indexed USDT/USDC data only.",
    "Call the tools to get facts. Every number you write must appear in a tool result; never estimate or invent one.",
    "You can only read wallet data. You cannot make payments, settle, write, change anything, or see configuration, keys or secrets: if asked, say so briefly and answer what you can about wallets.",
    `Wallets under discussion: ${resolved.wallets.length ? resolved.wallets.join(", ") : "none named"}. Detected question type: ${resolved.intent}.${resolved.period ? ` Period: ${resolved.period.label}.` : ""}`,
    asOf ? `Data is as of ${asOf}.` : "",
    "Answer in a few plain sentences.",
  ]
    .filter(Boolean)
    .join("\n");
}

type ModelAnswer =
  | { ok: true; answer: string; calls: ToolCallRecord[]; sources: Source[] }
  | { ok: false; reason: string; calls: ToolCallRecord[] };

/** Asks the model, running its tool calls; fails (with the reason) rather than answer unchecked. */
async function askModel(
  settings: ChatModelSettings,
  reader: WalletReader,
  message: string,
  resolved: ResolvedQuestion,
  dataAsOf: string | null,
): Promise<ModelAnswer> {
  const calls: ToolCallRecord[] = [];
  const sources: Source[] = [];
  const signal = AbortSignal.timeout(settings.timeoutMs);
  const tools = Object.entries(CHAT_TOOLS).map(([name, t]) => ({
    type: "function",
    function: { name, description: t.description, parameters: t.parameters },
  }));
  const messages: Message[] = [
    { role: "system", content: systemPrompt(resolved, dataAsOf) },
    { role: "user", content: message },
  ];
  try {
    for (let round = 0; round < MAX_MODEL_ROUNDS; round++) {
      const res = await fetch(settings.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: settings.model, messages, tools, tool_choice: "auto", temperature: 0 }),
        signal,
      });
      if (!res.ok) return { ok: false, reason: `the model endpoint answered ${res.status}`, calls };
      const parsed = completionSchema.safeParse(await res.json());
      if (!parsed.success) return { ok: false, reason: "the model endpoint's answer is not a chat completion", calls };
      const reply = parsed.data.choices[0]!.message;
      const toolCalls = reply.tool_calls ?? [];
      if (!toolCalls.length) {
        const answer = (reply.content ?? "").trim();
        if (!answer) return { ok: false, reason: "the model gave an empty answer", calls };
        if (SECRET_SHAPED.test(answer))
          return { ok: false, reason: "the model's answer contains something shaped like a key", calls };
        const allowed = allowedFigures(
          calls.filter((c) => !c.refused).map((c) => c.result),
          [message],
        );
        const unsupported = unsupportedFigures(answer, allowed);
        if (unsupported.length)
          return {
            ok: false,
            reason: `the model's answer has figures no tool result states (${unsupported.slice(0, 5).join(", ")})`,
            calls,
          };
        return { ok: true, answer, calls, sources: [...new Map(sources.map((s) => [s.name, s])).values()] };
      }
      messages.push({
        role: "assistant",
        content: reply.content ?? null,
        tool_calls: toolCalls.map((t) => ({
          id: t.id,
          type: "function",
          function: { name: t.function.name, arguments: t.function.arguments ?? "{}" },
        })),
      });
      for (const call of toolCalls) {
        signal.throwIfAborted();
        const tool = Object.hasOwn(CHAT_TOOLS, call.function.name) ? CHAT_TOOLS[call.function.name] : undefined;
        let args: unknown = null;
        let content: unknown;
        if (!tool) {
          content = {
            error: `tool "${call.function.name}" is not offered and was not run; the only tools are read-only: ${Object.keys(CHAT_TOOLS).join(", ")}`,
          };
          calls.push({ tool: call.function.name, arguments: null, refused: true, result: content });
        } else {
          try {
            args = JSON.parse(call.function.arguments ?? "{}");
            const out = await tool.run(reader, args);
            content = out.fact;
            sources.push(...out.sources);
            calls.push({ tool: call.function.name, arguments: args, refused: false, result: content });
          } catch (error) {
            content = {
              error: `the tool could not run: ${error instanceof z.ZodError ? "invalid arguments" : firstLine(error)}`,
            };
            calls.push({ tool: call.function.name, arguments: args, refused: true, result: content });
          }
        }
        messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(content) });
      }
    }
    return { ok: false, reason: `the model did not answer within ${MAX_MODEL_ROUNDS} rounds`, calls };
  } catch (error) {
    const e = error as Error;
    if (signal.aborted) return { ok: false, reason: `the model did not answer within ${settings.timeoutMs} ms`, calls };
    return { ok: false, reason: `the model endpoint failed (${firstLine(e)})`, calls };
  }
}

/** The deterministic outcome, or the model's phrasing of the same question when it passes every check. */
export async function withModel(
  settings: ChatModelSettings | null,
  reader: WalletReader,
  message: string,
  resolved: ResolvedQuestion,
  deterministic: ChatOutcome,
): Promise<{ outcome: ChatOutcome; engine: ModelEngine; toolCalls: ToolCallRecord[] }> {
  if (!settings)
    return {
      outcome: deterministic,
      engine: { name: "deterministic", model: null, fallbackReason: null, toolCalls: 0, refusedTools: [] },
      toolCalls: [],
    };
  const asked = await askModel(settings, reader, message, resolved, deterministic.dataAsOf?.time ?? null);
  const refusedTools = asked.calls.filter((c) => c.refused).map((c) => c.tool);
  if (!asked.ok)
    return {
      outcome: deterministic,
      engine: {
        name: "deterministic",
        model: settings.model,
        fallbackReason: asked.reason,
        toolCalls: asked.calls.length,
        refusedTools,
      },
      toolCalls: asked.calls,
    };
  return {
    outcome: {
      ...deterministic,
      answer: asked.answer,
      sources: asked.sources.length ? asked.sources : deterministic.sources,
    },
    engine: { name: "model", model: settings.model, fallbackReason: null, toolCalls: asked.calls.length, refusedTools },
    toolCalls: asked.calls,
  };
}
