CREATE TABLE "service"."credit_lot" (
	"token" text NOT NULL,
	"payer" text NOT NULL,
	"nonce" text NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	"remaining" numeric(78, 0) NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "credit_lot_pkey" PRIMARY KEY("token","payer","nonce"),
	CONSTRAINT "credit_lot_remaining_check" CHECK (remaining >= 0 and remaining <= amount)
);
--> statement-breakpoint
CREATE TABLE "service"."credit_spend" (
	"id" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"route" text NOT NULL,
	"subject" text,
	"fingerprint" text NOT NULL,
	"payment_id" text,
	"amount" numeric(78, 0) NOT NULL,
	"draws" jsonb NOT NULL,
	"status" text NOT NULL,
	"response_status" integer,
	"response_type" text,
	"response_body" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "credit_spend_status_check" CHECK (status in ('held', 'spent'))
);
--> statement-breakpoint
CREATE TABLE "service"."credit_token" (
	"hash" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"issued_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "credit_lot_payer" ON "service"."credit_lot" USING btree ("payer","expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "credit_spend_owner_id" ON "service"."credit_spend" USING btree ("owner","payment_id");--> statement-breakpoint
CREATE INDEX "credit_spend_owner_created" ON "service"."credit_spend" USING btree ("owner","created_at");--> statement-breakpoint
CREATE INDEX "credit_spend_held" ON "service"."credit_spend" USING btree ("updated_at") WHERE status = 'held';--> statement-breakpoint
CREATE INDEX "credit_token_owner" ON "service"."credit_token" USING btree ("owner") WHERE revoked_at is null;