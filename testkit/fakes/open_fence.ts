/**
 * The lease fence of a test whose attacher runs alone, without leader election: always open.
 * Named for what it is, so that a test that builds the controller hands it in by choice; the
 * fence is a required dependency and nothing falls back to one.
 *
 * @module
 */

import type { LeaseFence } from "../../lib/lease_fence.ts";

/** A fence that never closes. */
export const ALWAYS_OPEN_FENCE: LeaseFence = Object.freeze({ valid: () => true });
