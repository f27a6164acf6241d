import type { RouteHandler } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import type { Address } from "../../config/addresses.ts";
import type { AppEnv } from "../http/app-env.ts";
import { declareRoute, jsonBody } from "../http/declare.ts";
import { validatedInput } from "../http/payment.ts";
import { x402Billing } from "../payments/billing.ts";
import { CONVERSATION_LIFETIME_MS, type Conversations, memoryConversations } from "./conversations.ts";
import { answerDeterministic, CHAT_REFUSALS, readQuestion, refusalOf, resolveQuestion } from "./engine.ts";
import { type ChatDeps, WalletReader } from "./facts.ts";
import { addressesIn, addressesInOrNone } from "./language.ts";
import { type ChatModelSettings, chatModelSettings, withModel } from "./model.ts";
import { type ChatAnswer, chatAnswerSchema, chatRequestSchema, MAX_MESSAGE_CHARS } from "./schema.ts";

/**
 * Route middleware, before payment: every wallet the question names is an address (400) and
 * indexed (404 in tracked mode), and the question can be answered from wallet data (422
 * `no_wallet` or `unanswerable`: only answers with wallet data are paid). A question that continues
 * a conversation may take its wallets and intent from it: the handler checks it again after
 * payment, and its refusal then releases the payment unused.
 */
const chatChecks: MiddlewareHandler<AppEnv> = async (c, next) => {
  const input = validatedInput(c) as { message: string; walletAddress?: Address; conversationId?: string };
  for (const wallet of [...addressesIn(input.message), ...(input.walletAddress ? [input.walletAddress] : [])])
    c.var.assessor.ensureIndexed(wallet);
  if (!input.conversationId) {
    const refusal = refusalOf(readQuestion({ ...input, conversation: null }));
    if (refusal) throw refusal;
  }
  await next();
};

export const chatRoute = declareRoute("chat", {
  method: "post",
  path: "/api/agent/chat",
  tags: ["Agent"],
  summary: "Ask about wallets in plain words",
  description:
    `Answers a question about one or two wallets from the indexed data only, with the facts it used (data) and where they came from (sources). ` +
    `Wallets named in the message (0x + 40 hex) count first; walletAddress is the subject when the message names none; conversationId keeps the wallets for follow-ups ` +
    `(${CONVERSATION_LIFETIME_MS / 60_000} minutes after the last question). The message is 1 to ${MAX_MESSAGE_CHARS} characters. ` +
    `A deterministic engine answers unless a model is configured (CHAT_MODEL_URL); engine says which did. docs/api.md lists the questions it answers. ` +
    `Only answers with wallet data are paid: a question with no wallet (422 no_wallet), or one it cannot answer, help included (422 unanswerable), is refused before payment, or after it with the payment released when it continues a conversation.`,
  request: {
    body: jsonBody(
      chatRequestSchema,
      "The question, the wallet it is about when the message names none, and the conversation it continues",
    ),
  },
  ok: chatAnswerSchema,
  errors: { 400: ["invalid_message", "invalid_address"], 404: ["wallet_not_indexed"], 422: CHAT_REFUSALS },
  middleware: [chatChecks],
  payment: {
    subject: (input) => addressesInOrNone(input.message)[0] ?? (input.walletAddress as Address | undefined),
    caller: (input) => input.callerAddress as Address | undefined,
  },
});

export type ChatRouteDeps = ChatDeps & { conversations?: Conversations; chatModel?: ChatModelSettings | null };

/** One question answered: the deterministic engine, or the model when configured and its answer passes the checks. */
export async function chat(
  deps: ChatRouteDeps & { conversations: Conversations; chatModel: ChatModelSettings | null },
  question: { message: string; walletAddress?: Address; conversationId?: string },
  payer: Address,
) {
  const conversation = question.conversationId ? await deps.conversations.load(question.conversationId, payer) : null;
  const reader = new WalletReader(deps);
  const q = { message: question.message, walletAddress: question.walletAddress, conversation };
  const resolved = await resolveQuestion(reader, q);
  const deterministic = await answerDeterministic(reader, q, resolved);
  const { outcome, engine, toolCalls } = await withModel(
    deps.chatModel,
    reader,
    question.message,
    resolved,
    deterministic,
  );
  const saved = await deps.conversations.save(conversation ? question.conversationId! : null, payer, outcome.state);
  return {
    answer: outcome.answer,
    intent: outcome.intent,
    wallets: outcome.wallets,
    data: { ...outcome.data, ...(toolCalls.length ? { toolCalls } : {}) },
    sources: outcome.sources,
    modelVersion: outcome.modelVersion,
    dataAsOf: outcome.dataAsOf,
    engine,
    conversationId: saved.id,
    conversationExpiresAt: saved.expiresAt.toISOString(),
  };
}

/** POST /api/agent/chat, after validation and payment. */
export function chatHandler(deps: ChatRouteDeps): RouteHandler<typeof chatRoute, AppEnv> {
  const conversations = deps.conversations ?? memoryConversations();
  const chatModel = deps.chatModel === undefined ? chatModelSettings() : deps.chatModel;
  return async (c) => {
    const body = c.req.valid("json");
    const billing = await c.var.billing;
    const answer: ChatAnswer = {
      ...(await chat({ ...deps, conversations, chatModel }, body, billing.payer)),
      x402Billing: x402Billing(billing),
    };
    return c.json(chatAnswerSchema.parse(answer), 200);
  };
}
