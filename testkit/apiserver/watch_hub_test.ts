import assert from "node:assert/strict";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { realClock } from "../../lib/clock.ts";
import { plainVolumeAttachment } from "../harness/client_fixtures.ts";
import { Registry } from "./registry.ts";
import { resolveServedResource } from "./resources.ts";
import { INITIAL_CHUNK_BYTES, type WatchRequest } from "./watch_hub.ts";
import { WatchHub } from "./watch_hub.ts";

const decoder = new TextDecoder();

Deno.test("WatchHub writes a watch list a chunk per read and says when the last is written", async () => {
  const registry = new Registry({ clock: realClock }, {
    historyLimit: Infinity,
    initialResourceVersion: 100,
  });
  const res = resolveServedResource(VOLUME_ATTACHMENTS);
  const count = 1000;
  for (let i = 0; i < count; i++) {
    registry.create(res, "", plainVolumeAttachment(`va-${i}`), { seed: true });
  }
  const hub = new WatchHub({ registry, clock: realClock }, { bookmarkIntervalMs: 0 });
  const sent: WatchRequest[] = [];
  hub.onWatchListSent((request) => sent.push(request));
  const reader = hub.open({
    resource: res,
    namespace: "",
    resourceVersion: "",
    sendInitialEvents: true,
    allowBookmarks: true,
  }).getReader();
  const first = await reader.read();
  const firstText = decoder.decode(first.value);
  // One chunk of about INITIAL_CHUNK_BYTES, not the whole list; nothing more is written until
  // the reader asks.
  assert.ok(firstText.length >= INITIAL_CHUNK_BYTES);
  assert.ok(firstText.length < 2 * INITIAL_CHUNK_BYTES);
  assert.deepEqual(sent, []);
  // A change while the list is pending comes after its end bookmark.
  registry.create(res, "", plainVolumeAttachment("late"), { seed: true });
  let text = firstText;
  while (!text.includes('"name":"late"')) {
    const next = await reader.read();
    assert.equal(next.done, false);
    text += decoder.decode(next.value);
  }
  assert.equal(sent.length, 1);
  const events = text.trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(events.length, count + 2);
  assert.deepEqual(events.slice(-2).map((e) => e.type), ["BOOKMARK", "ADDED"]);
  assert.equal(
    events.at(-2).object.metadata.annotations["k8s.io/initial-events-end"],
    "true",
  );
  // The bookmark carries the list's resourceVersion, before the late object's.
  assert.ok(
    Number(events.at(-2).object.metadata.resourceVersion) <
      Number(events.at(-1).object.metadata.resourceVersion),
  );
  await reader.cancel();
  hub.dispose();
});
