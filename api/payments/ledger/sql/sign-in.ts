import { lt } from "drizzle-orm";
import { signInNonce } from "../../../store/schema.ts";
import type { SignInNonces } from "../ledger.ts";
import type { Store } from "./statements.ts";

/** Sign-in-with-x nonces: one use per proof across every replica. */
export function sqlSignInNonces(store: Store): SignInNonces {
  return {
    /** Expired nonces are pruned on the way. */
    async spendSignInNonce(nonce, wallet, expiresAt) {
      const db = await store;
      const inserted = await db
        .insert(signInNonce)
        .values({ nonce, wallet, expiresAt })
        .onConflictDoNothing()
        .returning({ nonce: signInNonce.nonce });
      if (inserted.length > 0 && Math.random() < 0.01)
        await db.delete(signInNonce).where(lt(signInNonce.expiresAt, new Date()));
      return inserted.length > 0;
    },
  };
}
