import { randomBytes } from "node:crypto";
import { sha256Hex } from "./fingerprint.ts";

/**
 * The credit token: a bearer secret naming one wallet's prepaid credit (`Authorization: Bearer
 * crd_…`). Only its sha256 is stored; its owner revokes it and issues another when signed in.
 */
const PREFIX = "crd_";
const TOKEN = /^Bearer\s+(crd_[A-Za-z0-9_-]{43})\s*$/;

export const mintCreditToken = () => `${PREFIX}${randomBytes(32).toString("base64url")}`;

export const hashCreditToken = (token: string) => sha256Hex(token);

/**
 * The credit token of an Authorization header: the token, undefined without a credit bearer
 * (another scheme is not ours to read), or "malformed" for a `Bearer crd_` that is not one.
 */
export function creditTokenOf(authorization: string | undefined): string | "malformed" | undefined {
  if (!authorization || !/^Bearer\s+crd_/.test(authorization)) return undefined;
  return TOKEN.exec(authorization)?.[1] ?? "malformed";
}
