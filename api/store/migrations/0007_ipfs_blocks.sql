CREATE TABLE "service"."ipfs_block" (
	"cid" text PRIMARY KEY NOT NULL,
	"bytes" "bytea" NOT NULL,
	"pinned" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "ipfs_block_pinned" ON "service"."ipfs_block" USING btree ("cid") WHERE pinned;