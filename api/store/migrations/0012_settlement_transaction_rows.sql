-- The signed transactions recorded so far in each payment's row (one copy per payment of a batch) move to their table, once each, before the column goes (0013).
INSERT INTO "service"."settlement_transaction" ("transaction", "settler", "settler_nonce", "raw_transaction", "created_at")
SELECT DISTINCT ON ("transaction") "transaction", "settler", "settler_nonce", "raw_transaction", "updated_at"
FROM "service"."payment"
WHERE "raw_transaction" IS NOT NULL AND "transaction" IS NOT NULL AND "settler" IS NOT NULL AND "settler_nonce" IS NOT NULL
ORDER BY "transaction", "updated_at" DESC
ON CONFLICT DO NOTHING;
