import assert from "node:assert/strict";
import type { DriverCall } from "../driver_log.ts";
import { PUBLISH } from "../driver_log.ts";
import { repeatedPublishes, type Term } from "./rolling_update.ts";

function publish(time: number, volumeId: string): DriverCall {
  return {
    time,
    completed: time,
    method: PUBLISH,
    request: { volume_id: volumeId },
    response: {},
    error: "",
  };
}

const at = (ms: number) => new Date(ms).toISOString().slice(11, 23);

Deno.test("repeatedPublishes() allows a repeat across a stop only for a VA not attached then", () => {
  const vaOfVolume = new Map([["1", "va1"], ["2", "va2"], ["3", "va3"], ["4", "va4"], [
    "5",
    "va5",
  ]]);
  const terms: Term[] = [
    { leader: "go", from: -Infinity, to: 100, attachedAtEnd: new Set(["va2", "va5"]) },
    { leader: "ours", from: 100, to: 200, attachedAtEnd: new Set() },
    { leader: "go", from: 200, to: Infinity, attachedAtEnd: new Set() },
  ];
  const calls = [
    publish(90, "1"), // Go, not attached at its stop: ours publishes again, a hand-over
    publish(150, "1"),
    publish(50, "2"), // Go, attached at its stop: ours must not publish again
    publish(160, "2"),
    publish(170, "3"), // twice in ours' term: never allowed
    publish(180, "3"),
    publish(20, "5"), // twice in a Go term: the Go replica's own
    publish(30, "5"),
    publish(190, "4"), // once; the failed call does not count
    { ...publish(195, "4"), error: "rpc error: code = Internal" },
    publish(60, "9"), // not a volume of the scenario
    publish(70, "9"),
  ];
  assert.deepEqual(repeatedPublishes(calls, vaOfVolume, terms), {
    handOver: [`va1 (${at(150)})`],
    goOwn: [`va5 (${at(30)})`],
    other: [`va2 (${at(160)})`, `va3 (${at(180)})`],
  });
});
