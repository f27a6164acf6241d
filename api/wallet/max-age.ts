/**
 * Assessments stay valid while the wallet's indexed activity is unchanged, and at most this long;
 * a paid call makes that wallet's free reads free as long (api/payments/free-read.ts).
 */
export const MAX_AGE_MS = 10 * 60_000;
