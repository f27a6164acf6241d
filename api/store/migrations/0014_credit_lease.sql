CREATE TABLE "service"."credit_lease" (
	"id" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	"spent" numeric(78, 0) DEFAULT '0' NOT NULL,
	"draws" jsonb NOT NULL,
	"wanted" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"renewed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"closed_at" timestamp with time zone,
	CONSTRAINT "credit_lease_spent_check" CHECK (spent >= 0 and spent <= amount)
);
--> statement-breakpoint
ALTER TABLE "service"."credit_spend" ALTER COLUMN "draws" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "service"."credit_spend" ADD COLUMN "lease" text;--> statement-breakpoint
CREATE INDEX "credit_lease_open" ON "service"."credit_lease" USING btree ("owner") WHERE closed_at is null;