import { randomUUID } from "node:crypto";
import { and, eq, gt, lt } from "drizzle-orm";
import type { Address } from "../../config/addresses.ts";
import { chatConversation } from "../store/schema.ts";
import type { ServiceDb } from "../store/store.ts";
import type { ConversationState } from "./engine.ts";
import type { Intent, Period } from "./language.ts";

/** A conversation lives this long after its last question; after that its id starts a new one. */
export const CONVERSATION_LIFETIME_MS = 60 * 60_000;

export type Conversations = {
  /** The conversation's state, if `id` is a live conversation of this payer. */
  load(id: string, payer: Address, now?: number): Promise<ConversationState | null>;
  /** Records the state after a question (a new id when `id` is null or not live) and prunes expired ones. */
  save(
    id: string | null,
    payer: Address,
    state: ConversationState,
    now?: number,
  ): Promise<{ id: string; expiresAt: Date }>;
};

/** Conversations in the service store (table `service.chat_conversation`). */
export function storedConversations(store: Promise<ServiceDb> | ServiceDb): Conversations {
  return {
    async load(id, payer, now = Date.now()) {
      const db = await store;
      const [row] = await db
        .select()
        .from(chatConversation)
        .where(
          and(
            eq(chatConversation.id, id),
            eq(chatConversation.payer, payer),
            gt(chatConversation.expiresAt, new Date(now)),
          ),
        )
        .limit(1);
      return row
        ? {
            wallets: row.wallets as Address[],
            intent: row.intent as Intent | null,
            period: row.period as Period | null,
          }
        : null;
    },
    async save(id, payer, state, now = Date.now()) {
      const db = await store;
      const expiresAt = new Date(now + CONVERSATION_LIFETIME_MS);
      const values = {
        wallets: state.wallets,
        intent: state.intent,
        period: state.period as Record<string, unknown> | null,
        updatedAt: new Date(now),
        expiresAt,
      };
      if (id) {
        const updated = await db
          .update(chatConversation)
          .set(values)
          .where(
            and(
              eq(chatConversation.id, id),
              eq(chatConversation.payer, payer),
              gt(chatConversation.expiresAt, new Date(now)),
            ),
          )
          .returning({ id: chatConversation.id });
        if (updated.length) return { id, expiresAt };
      }
      const fresh = randomUUID();
      await db.insert(chatConversation).values({ id: fresh, payer, createdAt: new Date(now), ...values });
      // Expired conversations are never read again: drop them as new ones start.
      await db.delete(chatConversation).where(lt(chatConversation.expiresAt, new Date(now)));
      return { id: fresh, expiresAt };
    },
  };
}

/** Conversations in this process's memory: for an app built without a service store (tests, embedding). */
export function memoryConversations(): Conversations {
  const rows = new Map<string, { payer: Address; state: ConversationState; expiresAt: number }>();
  return {
    async load(id, payer, now = Date.now()) {
      const row = rows.get(id);
      return row && row.payer === payer && row.expiresAt > now ? row.state : null;
    },
    async save(id, payer, state, now = Date.now()) {
      const live = id ? rows.get(id) : undefined;
      const key = live && live.payer === payer && live.expiresAt > now ? id! : randomUUID();
      const expiresAt = now + CONVERSATION_LIFETIME_MS;
      rows.set(key, { payer, state, expiresAt });
      for (const [k, row] of rows) if (row.expiresAt <= now) rows.delete(k);
      return { id: key, expiresAt: new Date(expiresAt) };
    },
  };
}
