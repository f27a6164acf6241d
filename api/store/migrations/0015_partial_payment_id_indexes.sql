DROP INDEX "service"."credit_spend_owner_id";--> statement-breakpoint
DROP INDEX "service"."payment_payer_id";--> statement-breakpoint
CREATE UNIQUE INDEX "credit_spend_owner_id" ON "service"."credit_spend" USING btree ("owner","payment_id") WHERE payment_id is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "payment_payer_id" ON "service"."payment" USING btree ("payer","payment_id") WHERE payment_id is not null;