import { randomBytes } from "node:crypto";

/**
 * A new endpoint signing secret in the Standard Webhooks form: `whsec_` then the base64 of 24
 * random bytes (192 bits), the key the receiver's library takes as is.
 */
export const newEndpointSecret = (): string => `whsec_${randomBytes(24).toString("base64")}`;
