CREATE TABLE "service"."sign_in_nonce" (
	"nonce" text PRIMARY KEY NOT NULL,
	"wallet" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "service"."payment" DROP CONSTRAINT "payment_status_check";--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "deferred" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "signature" text;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "valid_after" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "attempts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "payment_id" text;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "repaid_by" text;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD COLUMN "reference" text;--> statement-breakpoint
CREATE INDEX "sign_in_nonce_expires" ON "service"."sign_in_nonce" USING btree ("expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "payment_payer_id" ON "service"."payment" USING btree ("payer","payment_id");--> statement-breakpoint
CREATE INDEX "payment_deferred_payer" ON "service"."payment" USING btree ("payer","status") WHERE "service"."payment"."deferred" and "service"."payment"."repaid_by" is null;--> statement-breakpoint
ALTER TABLE "service"."payment" ADD CONSTRAINT "payment_status_check" CHECK (status in ('pending', 'queued', 'settling', 'settled', 'failed', 'waived', 'expired', 'used_elsewhere'));