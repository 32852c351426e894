import assert from "node:assert/strict";
import { PodTimeline } from "./pod_timeline.ts";

const names = ["vol-a", "vol-b"];
const indexOf = (name: string) => {
  const i = names.indexOf(name);
  return i < 0 ? undefined : i;
};

Deno.test("PodTimeline measures Pod created → listed and Pod deleted → unlisted per volume", () => {
  let now = 1000;
  const t = new PodTimeline({ now: () => now }, { count: 2, indexOf });
  t.podCreating(0);
  now = 1100;
  t.podCreating(1);
  now = 1500;
  t.observeNode("n1", ["vol-a", "other"]);
  assert.deepEqual(t.state("attached"), { done: false, count: 1, at: NaN });
  now = 1900;
  // A repeat of the list changes nothing; the other node lists vol-b.
  t.observeNode("n1", ["vol-a"]);
  t.observeNode("n2", ["vol-b"]);
  assert.deepEqual(t.state("attached"), { done: true, count: 2, at: 1900 });

  now = 3000;
  t.podDeleting(0);
  t.podDeleting(1);
  now = 3400;
  t.observeNode("n1", undefined);
  assert.deepEqual(t.state("gone"), { done: false, count: 1, at: NaN });
  now = 4000;
  t.observeNode("n2", []);
  assert.deepEqual(t.state("gone"), { done: true, count: 2, at: 4000 });

  const r = t.report();
  assert.equal(r.createStartedAt, 1000);
  assert.equal(r.lastAttachedAt, 1900);
  assert.equal(r.deleteStartedAt, 3000);
  assert.equal(r.lastDetachedAt, 4000);
  assert.deepEqual([r.attachLatencyMs.p50, r.attachLatencyMs.max], [500, 800]);
  assert.deepEqual([r.detachLatencyMs.p50, r.detachLatencyMs.max], [400, 1000]);
});

Deno.test("PodTimeline ignores volumes listed before their Pod and unlisted before its deletion", () => {
  let now = 0;
  const t = new PodTimeline({ now: () => now }, { count: 1, indexOf });
  // Listed before the Pod was created (left over): not an attach of this run.
  t.observeNode("n1", ["vol-a"]);
  assert.equal(t.state("attached").count, 0);
  now = 10;
  t.podCreating(0);
  now = 20;
  t.observeNode("n1", ["vol-a"]);
  assert.deepEqual(t.state("attached"), { done: true, count: 1, at: 20 });
  // Gone from the list while the Pod still exists: not a detach of the run.
  now = 30;
  t.observeNode("n1", []);
  assert.equal(t.state("gone").count, 0);
  now = 40;
  t.observeNode("n1", ["vol-a"]);
  t.podDeleting(0);
  now = 55;
  t.observeNode("n1", []);
  assert.deepEqual(t.state("gone"), { done: true, count: 1, at: 55 });
  assert.equal(t.report().detachLatencyMs.p50, 15);
});

Deno.test("PodTimeline reports NaN for phases that did not happen", () => {
  const r = new PodTimeline({ now: () => 0 }, { count: 3, indexOf }).report();
  assert.ok(Number.isNaN(r.createStartedAt));
  assert.ok(Number.isNaN(r.lastAttachedAt));
  assert.equal(r.attachLatencyMs.count, 0);
});
