CREATE TABLE "service"."chat_conversation" (
	"id" text PRIMARY KEY NOT NULL,
	"payer" text NOT NULL,
	"wallets" jsonb NOT NULL,
	"intent" text,
	"period" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "chat_conversation_expires" ON "service"."chat_conversation" USING btree ("expires_at");