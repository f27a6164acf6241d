CREATE TABLE "service"."payment_exposure" (
	"slot" integer PRIMARY KEY NOT NULL,
	"amount" numeric(78, 0) NOT NULL,
	CONSTRAINT "payment_exposure_slot" CHECK (slot >= 0 and slot < 16)
);
