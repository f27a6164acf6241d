CREATE TABLE "service"."index_settings" (
	"schema" text PRIMARY KEY NOT NULL,
	"settings" jsonb NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL
);
