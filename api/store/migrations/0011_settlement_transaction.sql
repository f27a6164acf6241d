CREATE TABLE "service"."settlement_transaction" (
	"transaction" text PRIMARY KEY NOT NULL,
	"settler" text NOT NULL,
	"settler_nonce" integer NOT NULL,
	"raw_transaction" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
