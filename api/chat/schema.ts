import { z } from "zod";
import { addressSchema } from "../../config/addresses.ts";
import { x402BillingSchema } from "../payments/billing.ts";
import { dataAsOfSchema } from "../wallet/schema.ts";
import { CONVERSATION_LIFETIME_MS } from "./conversations.ts";
import { FACT_SCHEMAS, periodSchema, sourceSchema } from "./facts.ts";
import { INTENTS } from "./language.ts";

/** The longest question accepted, in characters. */
export const MAX_MESSAGE_CHARS = 2000;

export const chatRequestSchema = z.object({
  message: z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(MAX_MESSAGE_CHARS, `must be at most ${MAX_MESSAGE_CHARS} characters`)
    .describe(
      `The question, in plain words (1 to ${MAX_MESSAGE_CHARS} characters). Wallets named in it (0x + 40 hex) are what it is about.`,
    ),
  walletAddress: addressSchema.optional().describe("The wallet the question is about when the message names none"),
  conversationId: z
    .uuid()
    .optional()
    .describe(
      `A conversation from an earlier answer: keeps its wallets for follow-ups. Conversations last ${CONVERSATION_LIFETIME_MS / 60_000} minutes after their last question; an unknown or expired one starts a new conversation.`,
    ),
  callerAddress: addressSchema.optional().describe("The paying wallet, when given it must be the payer"),
});

const factsSchema = z.object(
  Object.fromEntries(Object.entries(FACT_SCHEMAS).map(([k, s]) => [k, s.optional()])) as {
    [K in keyof typeof FACT_SCHEMAS]: z.ZodOptional<(typeof FACT_SCHEMAS)[K]>;
  },
);

export const chatAnswerSchema = z.object({
  answer: z.string().describe("The answer, for a person to read"),
  intent: z.enum(INTENTS).describe("What the question was read as asking"),
  wallets: z.array(z.string()).describe("The wallets the answer is about (a comparison: two)"),
  data: z
    .object({
      period: periodSchema.nullable().describe("The period the answer covers, when the question has one"),
      wallets: z.record(z.string(), factsSchema).describe("The facts behind the answer, per wallet"),
      toolCalls: z
        .array(z.object({ tool: z.string(), arguments: z.unknown(), refused: z.boolean(), result: z.unknown() }))
        .optional()
        .describe("Model mode: the tool calls the model made and their results"),
    })
    .describe("The structured facts the answer was written from"),
  sources: z
    .array(sourceSchema)
    .describe("The indexed aggregates the facts came from, and the route that answers the same figures"),
  modelVersion: z.string(),
  dataAsOf: dataAsOfSchema.nullable(),
  engine: z
    .object({
      name: z.enum(["deterministic", "model"]).describe("Which engine wrote the answer"),
      model: z.string().nullable().describe("The configured model (CHAT_MODEL), if any"),
      fallbackReason: z
        .string()
        .nullable()
        .describe("Why the deterministic engine answered although a model is configured"),
      toolCalls: z.number().int(),
      refusedTools: z.array(z.string()).describe("Tools the model asked for that are not offered (refused, never run)"),
    })
    .describe("Which engine answered"),
  conversationId: z.string().describe("Pass it back with a follow-up to keep the wallets"),
  conversationExpiresAt: z.iso.datetime(),
  x402Billing: x402BillingSchema,
});
export type ChatAnswer = z.infer<typeof chatAnswerSchema>;
