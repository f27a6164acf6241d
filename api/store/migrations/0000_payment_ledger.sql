CREATE TABLE "service"."payment" (
	"token" text NOT NULL,
	"payer" text NOT NULL,
	"nonce" text NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	"route" text NOT NULL,
	"subject" text,
	"fingerprint" text NOT NULL,
	"signature_hash" text NOT NULL,
	"encoding" text NOT NULL,
	"status" text NOT NULL,
	"failure" text,
	"transaction" text,
	"response_status" integer,
	"response_type" text,
	"response_body" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"settled_at" timestamp with time zone,
	CONSTRAINT "payment_pkey" PRIMARY KEY("token","payer","nonce"),
	CONSTRAINT "payment_status_check" CHECK (status in ('pending', 'settled', 'failed', 'waived'))
);
--> statement-breakpoint
CREATE INDEX "payment_payer_subject" ON "service"."payment" USING btree ("payer","subject","settled_at");