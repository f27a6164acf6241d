import { type Env, readEnv } from "./env.ts";
import { StartupError } from "./errors.ts";

/**
 * The origin a sign-in-with-x proof must name (its domain and URI): configuration, never a
 * request's Host or X-Forwarded-Host, which the client chooses (a proof signed for another site
 * would pass). SIGN_IN_ORIGIN; on the devnet by default the URL the launcher prints. Live Celo
 * (PONDER_RPC_URL_42220, the rule of resolveIndexTarget) cannot start without it.
 */
export function resolveSignInOrigin(env: Env = readEnv()): string {
  if (env.SIGN_IN_ORIGIN) return new URL(env.SIGN_IN_ORIGIN).origin;
  if (!env.PONDER_RPC_URL_42220) return `http://127.0.0.1:${env.PORT}`;
  throw new StartupError(
    "Set SIGN_IN_ORIGIN to the public origin clients reach the API at (e.g. https://api.example.com): sign-in-with-x proofs must name it.",
  );
}
