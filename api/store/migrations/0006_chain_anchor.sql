CREATE TABLE "service"."chain_anchor" (
	"chain_id" integer PRIMARY KEY NOT NULL,
	"block_number" numeric(78, 0) NOT NULL,
	"block_hash" text NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL
);
