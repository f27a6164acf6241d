CREATE TABLE "service"."ipfs_content" (
	"cid" text PRIMARY KEY NOT NULL,
	"media_type" text NOT NULL,
	"size" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "service"."statement" (
	"cid" text PRIMARY KEY NOT NULL,
	"csv_cid" text NOT NULL,
	"wallet" text NOT NULL,
	"period" text NOT NULL,
	"from_at" timestamp with time zone NOT NULL,
	"to_at" timestamp with time zone NOT NULL,
	"block" numeric(78, 0) NOT NULL,
	"transfers" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "statement_wallet_created" ON "service"."statement" USING btree ("wallet","created_at");