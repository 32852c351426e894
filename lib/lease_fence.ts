/**
 * The seam between leader election and the work a leader does: one {@link LeaseFence} per term
 * of leadership, a synchronous question asked at the last synchronous moment before every act of
 * the leader that needs the lease, and one error, {@link FencedError}, for an act it refused.
 *
 * client-go's leader election (`tools/leaderelection/leaderelection.go`) stops the leader when a
 * timer fires; after a pause (a stopped process, a frozen VM) the timer fires late and the leader
 * acts while another replica may already lead. A {@link LeaseFence} is read from the monotonic
 * clock at the moment of the act instead:
 *
 * - a driver call: by the HTTP/2 frame writer (`wire/http2/writer.ts`) immediately before the
 *   `Deno.Conn.write` that would carry the request's frames;
 * - an API write of the leader's work (VolumeAttachment and PersistentVolume patches): by the
 *   Kubernetes client after its wait for the rate limiter (`kube/client.ts`) and by the HTTP/1.1
 *   transport immediately before each write of the request's bytes (`wire/http1/transport.ts`),
 *   again for every retry and every new connection;
 * - the controller's steps ask it too before they start a write or call, to stop a sync early.
 *
 * Between the last yes and the bytes handed to the kernel runs only synchronous code. What it
 * cannot cover (a pause after the write, a request already at the driver) is in ARCHITECTURE.md
 * ("One leader at a time"). Lease renewals, Events and reads are not fenced: they need no lease.
 *
 * The fence is handed to the leader's work when its term starts (`LeaderElector`'s
 * `onStartedLeading(signal, fence)`) and is closed for good when the term ends; every component
 * that acts for the leader takes it as a required dependency, so none runs unfenced by omission.
 * Without `--leader-election` the start-up wiring passes {@link SOLE_REPLICA} by name.
 *
 * @module
 */

/** Whether this replica may still act as the leader, answered synchronously, without I/O. */
export interface LeaseFence {
  /**
   * True while the lease of this term cannot have passed to another replica. Once false it stays
   * false (the term is over and the leader's work stops).
   */
  valid(): boolean;
}

/**
 * The fence of a replica run without leader election (`--leader-election=false`): whoever runs it
 * so declares it the only replica, and it acts whenever it runs. Passed explicitly by the start-up
 * wiring (`run.ts`); no component falls back to it.
 */
export const SOLE_REPLICA: LeaseFence = Object.freeze({ valid: () => true });

/** The text of {@link FencedError}. */
export const FENCED_TEXT = "request not sent: this replica's lease could have passed to another";

/**
 * What an act refused by its {@link LeaseFence} fails with, at every layer from the connection
 * up (HTTP/2 stream, gRPC call, CSI call, HTTP/1.1 request, Kubernetes request): the request was
 * not sent whole, so its receiver never ran it. The controller turns it into a stop (the sync's
 * `stopped`), never into a failure to record or retry.
 */
export class FencedError extends Error {
  constructor() {
    super(FENCED_TEXT);
    this.name = "FencedError";
  }
}

/**
 * The text logged (V(0)) when the fence refuses an act: the sync ends as on SIGTERM, the key is
 * left for the next leader.
 */
export const FENCE_REFUSED_MESSAGE =
  "Lease could have passed to another replica: not acting as leader";
