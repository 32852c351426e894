/**
 * The built-in example driver's fault flags, shared by `csi-attacher sandbox` and `csi-attacher
 * sandbox check`: `--fail=<call>:<code>`, `--slow=<call>:<duration>`, `--non-idempotent`,
 * `--multi-attach`, `--hide-published` (see `testkit/csi/driver_faults.ts`).
 *
 * @module
 */

import type { FlagSet } from "../lib/cli/flags.ts";
import {
  addFailure,
  addSlowness,
  type DriverFaults,
  noFaults,
} from "../testkit/csi/driver_faults.ts";
import type { ExampleDriverOptions } from "../testkit/csi/example_driver.ts";

/** The fault flags, defined on a FlagSet. */
export interface FaultFlags {
  /** True when any fault flag was given. */
  readonly any: boolean;
  /** The example driver's options for the faults given. */
  driverOptions(): Pick<ExampleDriverOptions, "faults" | "nonIdempotent">;
}

/** The message for fault flags given with a real driver. */
export const FAULTS_NEED_BUILT_IN =
  "--fail, --slow, --non-idempotent, --multi-attach and --hide-published are for the built-in driver only";

/** Defines the fault flags on `set`. */
export function defineFaultFlags(set: FlagSet): FaultFlags {
  const fail = set.custom<DriverFaults>(
    "fail",
    noFaults(),
    "Built-in driver only: make a call fail, <call>:<gRPC code>, e.g. publish:NotFound (calls: publish, unpublish, list-volumes); repeatable.",
    { parse: (text, current) => addFailure(current, text), typeName: "call:code" },
  );
  const slow = set.custom<DriverFaults>(
    "slow",
    noFaults(),
    "Built-in driver only: make a call answer late, <call>:<duration>, e.g. publish:5s; repeatable.",
    { parse: (text, current) => addSlowness(current, text), typeName: "call:duration" },
  );
  const nonIdempotent = set.bool(
    "non-idempotent",
    false,
    "Built-in driver only: a repeated publish answers AlreadyExists, an unpublish of what is not published NotFound.",
  );
  const multiAttach = set.bool(
    "multi-attach",
    false,
    "Built-in driver only: publish a single-node volume to a second node instead of answering FailedPrecondition.",
  );
  const hidePublished = set.bool(
    "hide-published",
    false,
    "Built-in driver only: ListVolumes lists every volume as published to no node.",
  );
  return {
    get any() {
      return fail.isSet || slow.isSet || nonIdempotent.value || multiAttach.value ||
        hidePublished.value;
    },
    driverOptions() {
      return {
        nonIdempotent: nonIdempotent.value,
        faults: {
          fail: fail.value.fail,
          slowMs: slow.value.slowMs,
          multiAttach: multiAttach.value,
          hidePublished: hidePublished.value,
        },
      };
    },
  };
}
