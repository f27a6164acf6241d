DROP INDEX "service"."payment_payer_subject";--> statement-breakpoint
DROP INDEX "service"."payment_status_updated";--> statement-breakpoint
CREATE INDEX "payment_payer_subject" ON "service"."payment" USING btree ("payer","subject","settled_at") WHERE status = 'settled';--> statement-breakpoint
CREATE INDEX "payment_status_updated" ON "service"."payment" USING btree ("status","updated_at") WHERE status in ('pending', 'settling');