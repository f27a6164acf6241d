ALTER TABLE "service"."payment" DROP CONSTRAINT "payment_status_check";--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "valid_before" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "settler" text;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "settler_nonce" integer;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "raw_transaction" text;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "reconciled_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "payment_status_updated" ON "service"."payment" USING btree ("status","updated_at");--> statement-breakpoint
ALTER TABLE "service"."payment" ADD CONSTRAINT "payment_status_check" CHECK (status in ('pending', 'settling', 'settled', 'failed', 'waived', 'expired', 'used_elsewhere'));