-- Custom SQL migration: triggers that keep payment_exposure (schema.ts) equal to the amounts of
-- the payments in the exposure: rules.ts OPEN_EXPOSURE's rows (deferred, not repaid, and unsettled
-- or a debt: failed by the payer's doing once answered), written once here as payment_exposed;
-- test/db/service-store.test.ts holds the two equal on every combination of the columns they read.
CREATE FUNCTION "service"."payment_exposed"(deferred boolean, repaid_by text, status text, response_body text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT deferred AND repaid_by IS NULL
    AND (status IN ('pending', 'queued', 'settling') OR (status IN ('failed', 'used_elsewhere') AND response_body IS NOT NULL))
$$;--> statement-breakpoint
-- Statement triggers: a batch moves one row, once.
CREATE FUNCTION "service"."payment_exposure_moved"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  moved numeric := 0;
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    UPDATE "service"."payment_exposure" SET amount = 0;
    RETURN NULL;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    moved := moved + coalesce((SELECT sum(amount) FROM new_rows
      WHERE "service"."payment_exposed"(deferred, repaid_by, status, response_body)), 0);
  END IF;
  IF TG_OP <> 'INSERT' THEN
    moved := moved - coalesce((SELECT sum(amount) FROM old_rows
      WHERE "service"."payment_exposed"(deferred, repaid_by, status, response_body)), 0);
  END IF;
  -- Only a write that changes the exposure takes a row's lock (a queued answer does not), and
  -- the one of its backend (16 slots, EXPOSURE_SLOTS): concurrent writers seldom wait on each other.
  IF moved <> 0 THEN
    UPDATE "service"."payment_exposure" SET amount = amount + moved WHERE slot = pg_backend_pid() % 16;
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "payment_exposure_insert" AFTER INSERT ON "service"."payment" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "service"."payment_exposure_moved"();--> statement-breakpoint
CREATE TRIGGER "payment_exposure_update" AFTER UPDATE ON "service"."payment" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "service"."payment_exposure_moved"();--> statement-breakpoint
CREATE TRIGGER "payment_exposure_delete" AFTER DELETE ON "service"."payment" REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "service"."payment_exposure_moved"();--> statement-breakpoint
CREATE TRIGGER "payment_exposure_truncate" AFTER TRUNCATE ON "service"."payment" FOR EACH STATEMENT EXECUTE FUNCTION "service"."payment_exposure_moved"();--> statement-breakpoint
-- What the payments a store already holds have open, in slot 0. (CREATE TRIGGER above holds off
-- every write of payment until this migration commits: the sum misses none.)
INSERT INTO "service"."payment_exposure" ("slot", "amount")
  SELECT slot, CASE WHEN slot = 0 THEN (SELECT coalesce(sum(amount), 0) FROM "service"."payment"
    WHERE "service"."payment_exposed"(deferred, repaid_by, status, response_body)) ELSE 0 END
  FROM generate_series(0, 15) AS slot;
