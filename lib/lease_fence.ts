/**
 * The seam between leader election and the work a leader does: a synchronous question asked
 * immediately before every act of a leader (a driver call, a write to the API server).
 *
 * client-go's leader election (`tools/leaderelection/leaderelection.go`) stops the leader when a
 * timer fires; after a pause (a stopped process, a frozen VM) the timer fires late and the leader
 * acts while another replica may already lead. A {@link LeaseFence} is read from the monotonic
 * clock at the moment of the act instead, so nothing asynchronous stands between the answer and
 * the act. ARCHITECTURE.md ("One leader at a time") states the rule and what it cannot cover.
 *
 * @module
 */

/** Whether this replica may still act as the leader, answered synchronously, without I/O. */
export interface LeaseFence {
  /**
   * True while the lease this replica last wrote cannot have passed to another replica. Once
   * false it stays false for the rest of the term (the leader's work stops).
   */
  valid(): boolean;
}

/** The fence of a replica that runs without leader election: it is always the only one. */
export const UNFENCED: LeaseFence = Object.freeze({ valid: () => true });

/**
 * The text logged (V(0)) when the fence refuses an act: the sync ends as on SIGTERM, the key is
 * left for the next leader.
 */
export const FENCE_REFUSED_MESSAGE =
  "Lease could have passed to another replica: not acting as leader";
