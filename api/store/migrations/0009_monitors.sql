CREATE TABLE "service"."monitor" (
	"id" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"wallet" text NOT NULL,
	"endpoint_id" text,
	"events" jsonb NOT NULL,
	"score_below" integer,
	"worse_than" text,
	"paid_until" timestamp with time zone NOT NULL,
	"payment_ref" text NOT NULL,
	"snapshot" jsonb,
	"snapshot_block" numeric(78, 0),
	"screened_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "service"."monitor_cursor" (
	"name" text PRIMARY KEY NOT NULL,
	"block" numeric(78, 0) NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "service"."monitor_event" (
	"seq" integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "service"."monitor_event_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 START WITH 1 CACHE 1),
	"id" text NOT NULL,
	"owner" text NOT NULL,
	"monitor_id" text NOT NULL,
	"wallet" text NOT NULL,
	"type" text NOT NULL,
	"before" jsonb,
	"after" jsonb,
	"block" numeric(78, 0) NOT NULL,
	"block_hash" text NOT NULL,
	"model_version" text NOT NULL,
	"retracts" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "service"."webhook_delivery" (
	"event_id" text NOT NULL,
	"endpoint_id" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"leased_until" timestamp with time zone,
	"last_status" integer,
	"last_error" text,
	"delivered_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_delivery_pkey" PRIMARY KEY("event_id","endpoint_id")
);
--> statement-breakpoint
CREATE TABLE "service"."webhook_endpoint" (
	"id" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"url" text NOT NULL,
	"secret" text NOT NULL,
	"previous_secret" text,
	"previous_until" timestamp with time zone,
	"disabled_at" timestamp with time zone,
	"disabled_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "monitor_wallet" ON "service"."monitor" USING btree ("wallet");--> statement-breakpoint
CREATE INDEX "monitor_owner" ON "service"."monitor" USING btree ("owner","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "monitor_event_id" ON "service"."monitor_event" USING btree ("id");--> statement-breakpoint
CREATE INDEX "monitor_event_owner" ON "service"."monitor_event" USING btree ("owner","seq");--> statement-breakpoint
CREATE INDEX "monitor_event_block" ON "service"."monitor_event" USING btree ("block");--> statement-breakpoint
CREATE INDEX "monitor_event_retracts" ON "service"."monitor_event" USING btree ("retracts");--> statement-breakpoint
CREATE INDEX "webhook_delivery_due" ON "service"."webhook_delivery" USING btree ("next_attempt_at") WHERE status = 'pending';--> statement-breakpoint
CREATE INDEX "webhook_endpoint_owner" ON "service"."webhook_endpoint" USING btree ("owner");