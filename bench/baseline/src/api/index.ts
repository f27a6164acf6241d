import { Hono } from "hono";

// Ponder requires an API entry; the baseline serves nothing.
export default new Hono();
