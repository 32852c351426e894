/**
 * The checks of `csi-attacher sandbox check`, in the order the attacher's life brings them:
 * its startup calls, a detach of a volume never published (what a restart or a takeover finds
 * after an attach that failed), the publish and its repetition, the ListVolumes reconciliation,
 * a second node, the unpublish and its repetition, then the volume kinds (read-only, block,
 * mount options), secrets and a call cut off by its deadline.
 *
 * Each check makes the objects the Kubernetes controllers would and lets the attacher's own
 * handler and reconciler ({@link CheckRig}) act on them, so a failure reads as the attacher
 * would record it: the text of `status.attachError` / `status.detachError`, or its log line.
 *
 * @module
 */

import { errorText } from "../lib/errors.ts";
import { type CheckedCall, CheckRig, type SyncRead } from "./check_rig.ts";
import { showValue } from "./timeline.ts";

/** How a check ended. */
export type CheckStatus = "passed" | "failed" | "skipped";

/** What a check found. */
export interface CheckOutcome {
  status: CheckStatus;
  /** One line: what passed, what failed and how the attacher records it, or why skipped. */
  message: string;
  /** The attacher's own text (the `attachError`/`detachError` message or log line), if any. */
  attacherText?: string;
}

/** What the checks are run with. */
export interface CheckConfig {
  volumeHandle: string;
  nodeId: string;
  /** Empty: no second-node check. */
  secondNodeId: string;
  /** The PersistentVolume's access mode, e.g. `ReadWriteOnce`. */
  accessMode: string;
  /** `spec.csi.fsType` of the mount checks; "" for none. */
  fsType: string;
  /** `spec.mountOptions` of the mount-options check. */
  mountOptions: string[];
  /** `spec.csi.volumeAttributes` of every PersistentVolume. */
  volumeAttributes: Record<string, string>;
  /** The Secret of the secrets check. */
  secret: Record<string, string>;
  /** `--timeout`, in ms. */
  timeoutMs: number;
  /** Check IDs to skip. */
  skip: ReadonlySet<string>;
}

/** What checks learn from the ones before them. */
export interface CheckState {
  /** Set when the attacher would not get past its startup: why. */
  startupFailed?: string;
  /** The publish context of the first publish, when it succeeded. */
  published?: Record<string, string>;
}

/** One check. */
export interface Check {
  /** Short ID (`publish`, `list-volumes-paging`), the JUnit test case name. */
  id: string;
  /** What it asks of the driver. */
  title: string;
  /** Runs the check; it may end the rig's objects as it found them. */
  run(rig: CheckRig, config: CheckConfig, state: CheckState): Promise<CheckOutcome>;
}

/** Node names of the CSINodes the checks create. */
export const CHECK_NODE = "node-1";
export const CHECK_SECOND_NODE = "node-2";
/** The PersistentVolume and VolumeAttachment of the publish checks. */
const PV = "pv-1";
const VA = "va-1";

const SINGLE_NODE_ACCESS_MODES = new Set(["ReadWriteOnce", "ReadWriteOncePod"]);

function passed(message: string): CheckOutcome {
  return { status: "passed", message };
}

function skipped(message: string): CheckOutcome {
  return { status: "skipped", message };
}

/** A failure the attacher records: `what` it means, `recorded` the text it writes or logs. */
function failedWith(what: string, recorded: string): CheckOutcome {
  return { status: "failed", message: `${what}: ${recorded}`, attacherText: recorded };
}

const RETRY = "the attacher writes it and retries with exponential backoff";

/** Why the publish checks cannot run, if they cannot. */
function publishSkipReason(rig: CheckRig, state: CheckState): string | undefined {
  if (state.startupFailed !== undefined) return state.startupFailed;
  const caps = rig.capabilities;
  if (caps !== undefined && !caps.publishUnpublish) {
    return "the driver has no PUBLISH_UNPUBLISH_VOLUME: the attacher marks VolumeAttachments " +
      "attached without calling it";
  }
  return undefined;
}

function spec(config: CheckConfig, extra: { readOnly?: boolean; secret?: string } = {}) {
  return {
    accessModes: [config.accessMode],
    csi: {
      readOnly: extra.readOnly ?? false,
      ...(config.fsType === "" ? {} : { fsType: config.fsType }),
      ...(Object.keys(config.volumeAttributes).length === 0
        ? {}
        : { volumeAttributes: { ...config.volumeAttributes } }),
      ...(extra.secret === undefined
        ? {}
        : { controllerPublishSecretRef: { name: extra.secret, namespace: "default" } }),
    },
  };
}

/** The last call of `method` since `from` (an index into `rig.calls`). */
function lastCall(rig: CheckRig, method: string, from: number): CheckedCall | undefined {
  return rig.calls.slice(from).findLast((c) => c.method === method);
}

/**
 * Attaches then detaches a new VolumeAttachment of a new PV built by `makePv`; the outcome
 * names the first step that failed. `inspect` may look at the ControllerPublishVolume request.
 */
async function attachDetach(
  rig: CheckRig,
  config: CheckConfig,
  name: string,
  inspect?: (request: Record<string, unknown>) => string | undefined,
): Promise<CheckOutcome & { attached?: SyncRead }> {
  const from = rig.calls.length;
  rig.ensureCsiNode(CHECK_NODE, config.nodeId);
  const attached = await rig.attach(`va-${name}`);
  const detached = await rig.detach(`va-${name}`);
  if (!attached.ok) {
    return failedWith(`publish failed (${RETRY})`, attached.message);
  }
  const publish = lastCall(rig, "ControllerPublishVolume", from);
  const wrong = publish === undefined ? undefined : inspect?.(publish.request);
  if (wrong !== undefined) return { status: "failed", message: wrong };
  if (!detached.ok) {
    return failedWith(`unpublish failed (${RETRY}; the finalizer stays)`, detached.message);
  }
  return { ...passed("published and unpublished"), attached };
}

const probe: Check = {
  id: "probe",
  title: "connect and Probe until ready, as the attacher does at startup",
  async run(rig, _config, state) {
    try {
      await rig.connectDriver();
      await rig.probe();
    } catch (err) {
      state.startupFailed = "the attacher exits at startup (see probe)";
      return failedWith("the attacher exits 1", errorText(err));
    }
    return passed("connected; the driver is ready");
  },
};

const pluginInfo: Check = {
  id: "plugin-info",
  title: "GetPluginInfo: the driver name (VolumeAttachment spec.attacher, finalizer, Lease)",
  async run(rig, _config, state) {
    if (state.startupFailed !== undefined) return skipped(state.startupFailed);
    try {
      const name = await rig.readDriverName();
      return passed(`driver name ${name}`);
    } catch (err) {
      state.startupFailed = "the attacher exits at startup (see plugin-info)";
      return failedWith("the attacher exits 1", errorText(err));
    }
  },
};

const capabilities: Check = {
  id: "capabilities",
  title: "GetPluginCapabilities and ControllerGetCapabilities: what the attacher will use",
  async run(rig, _config, state) {
    if (state.startupFailed !== undefined) return skipped(state.startupFailed);
    try {
      const caps = await rig.readCapabilities();
      const uses: string[] = [];
      if (!caps.controllerService) uses.push("no CONTROLLER_SERVICE");
      uses.push(
        caps.publishUnpublish
          ? "ControllerPublish/Unpublish (PUBLISH_UNPUBLISH_VOLUME)"
          : "no driver calls per VolumeAttachment (no PUBLISH_UNPUBLISH_VOLUME)",
      );
      uses.push(
        caps.reconcile
          ? "the ListVolumes reconciler (LIST_VOLUMES, LIST_VOLUMES_PUBLISHED_NODES)"
          : "no ListVolumes reconciler (it needs LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES)",
      );
      uses.push(caps.publishReadonly ? "readonly (PUBLISH_READONLY)" : "readonly always false");
      if (caps.singleNodeMultiWriter) uses.push("SINGLE_NODE_* access modes");
      return passed(`the attacher uses ${uses.join("; ")}`);
    } catch (err) {
      state.startupFailed = "the attacher exits at startup (see capabilities)";
      return failedWith("the attacher exits 1", errorText(err));
    }
  },
};

const unpublishNeverPublished: Check = {
  id: "unpublish-never-published",
  title: "ControllerUnpublishVolume of a volume not published to the node " +
    "(a VolumeAttachment deleted before its attach succeeded)",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    rig.ensureCsiNode(CHECK_NODE, config.nodeId);
    rig.createPv(PV, config.volumeHandle, spec(config), config.accessMode);
    rig.createVa("va-never", PV, CHECK_NODE, { nodeId: config.nodeId });
    const detached = await rig.detach("va-never");
    if (!detached.ok) {
      return failedWith(
        "the driver must answer OK; the VolumeAttachment keeps its finalizer and " +
          "status.detachError until it does",
        detached.message,
      );
    }
    return passed("answered OK; the VolumeAttachment is gone");
  },
};

const publish: Check = {
  id: "publish",
  title: "ControllerPublishVolume of a new VolumeAttachment",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    rig.ensureCsiNode(CHECK_NODE, config.nodeId);
    if (rig.server.find("persistentvolumes", PV) === undefined) {
      rig.createPv(PV, config.volumeHandle, spec(config), config.accessMode);
    }
    rig.createVa(VA, PV, CHECK_NODE);
    const attached = await rig.attach(VA);
    if (!attached.ok) {
      return failedWith(`status.attachError (${RETRY})`, attached.message);
    }
    state.published = attached.metadata;
    return passed(
      `status.attached=true, attachmentMetadata=${showValue(attached.metadata)}`,
    );
  },
};

const publishAgain: Check = {
  id: "publish-again",
  title: "the same ControllerPublishVolume again (after a restart, a timeout or a reconcile)",
  async run(rig, _config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    if (state.published === undefined) return skipped("needs a published volume (see publish)");
    const again = await rig.attach(VA, { force: true });
    if (!again.ok) {
      return failedWith(
        `the driver must answer OK as the first time; status.attachError (${RETRY})`,
        again.message,
      );
    }
    if (showValue(again.metadata) !== showValue(state.published)) {
      return {
        status: "failed",
        message: `the publish context changed from ${showValue(state.published)} to ${
          showValue(again.metadata)
        }: the attacher overwrites status.attachmentMetadata, which kubelet reads`,
      };
    }
    return passed("answered OK with the same publish context");
  },
};

/** The reconciler checks: one pass with `maxEntries`, against the published volume. */
async function listVolumesCheck(
  rig: CheckRig,
  config: CheckConfig,
  state: CheckState,
  maxEntries: number,
): Promise<CheckOutcome> {
  const skip = publishSkipReason(rig, state);
  if (skip !== undefined) return skipped(skip);
  const caps = rig.capabilities;
  if (caps !== undefined && !caps.reconcile) {
    return skipped(
      "the attacher reconciles only with LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES",
    );
  }
  if (state.published === undefined) return skipped("needs a published volume (see publish)");
  const from = rig.calls.length;
  let queued: string[];
  try {
    queued = await rig.reconcile(maxEntries);
  } catch (err) {
    return failedWith(
      "the attacher logs it every --reconcile-sync and reconciles nothing",
      errorText(err),
    );
  }
  const pages = rig.calls.slice(from).filter((c) => c.method === "ListVolumes");
  const nodes: string[] = [];
  for (const page of pages) {
    if (page.outcome.kind !== "response") continue;
    const entries = Array.isArray(page.outcome.response.entries)
      ? page.outcome.response.entries as Record<string, unknown>[]
      : [];
    if (maxEntries > 0 && entries.length > maxEntries) {
      return {
        status: "failed",
        message: `ListVolumes with max_entries=${maxEntries} answered ${entries.length} ` +
          "entries; the CSI spec allows at most max_entries",
      };
    }
    for (const entry of entries) {
      // The client logs each entry as it decoded it: `{volumeId, publishedNodeIds}`.
      const ids = Array.isArray(entry.publishedNodeIds) ? entry.publishedNodeIds : [];
      if (entry.volumeId === config.volumeHandle) nodes.push(...ids.map(String));
    }
  }
  const paging = `${pages.length} page${pages.length === 1 ? "" : "s"}`;
  if (queued.includes(VA)) {
    const listed = nodes.length === 0 ? "on no node" : `on ${nodes.join(", ")}`;
    return failedWith(
      `ListVolumes (${paging}) lists ${config.volumeHandle} published ${listed}, not on ` +
        `${config.nodeId}, while ${VA} is attached: every --reconcile-sync the attacher ` +
        "publishes it again",
      "Driver's published state differs from VolumeAttachment, requeueing",
    );
  }
  return passed(
    `${paging}; published_node_ids of ${config.volumeHandle}: ${
      nodes.length === 0 ? "(none)" : nodes.join(", ")
    }, as published`,
  );
}

const listVolumes: Check = {
  id: "list-volumes",
  title: "ListVolumes without max_entries: published_node_ids against what was published",
  run: (rig, config, state) => listVolumesCheck(rig, config, state, 0),
};

const listVolumesPaging: Check = {
  id: "list-volumes-paging",
  title: "ListVolumes with max_entries=1, following next_token to the end",
  run: (rig, config, state) => listVolumesCheck(rig, config, state, 1),
};

const secondNode: Check = {
  id: "second-node",
  title: "ControllerPublishVolume of the published single-node volume to a second node " +
    "(FAILED_PRECONDITION expected)",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    if (config.secondNodeId === "") return skipped("no --second-node-id");
    if (!SINGLE_NODE_ACCESS_MODES.has(config.accessMode)) {
      return skipped(`--access-mode=${config.accessMode} allows several nodes`);
    }
    if (state.published === undefined) return skipped("needs a published volume (see publish)");
    rig.ensureCsiNode(CHECK_SECOND_NODE, config.secondNodeId);
    rig.createVa("va-2", PV, CHECK_SECOND_NODE);
    const attached = await rig.attach("va-2");
    const detached = await rig.detach("va-2");
    if (attached.ok) {
      return {
        status: "failed",
        message: `the driver published a ${config.accessMode} volume to a second node ` +
          `(${config.secondNodeId}) while it is published to ${config.nodeId}`,
      };
    }
    if (!attached.message.startsWith("rpc error: code = FailedPrecondition ")) {
      return failedWith(
        "expected FailedPrecondition; status.attachError",
        attached.message,
      );
    }
    if (!detached.ok) {
      return failedWith(
        "refused as expected, but its detach (an unpublish from a node it is not published " +
          "to) failed",
        detached.message,
      );
    }
    return {
      ...passed(`refused; status.attachError: ${attached.message}`),
      attacherText: attached.message,
    };
  },
};

const unpublish: Check = {
  id: "unpublish",
  title: "ControllerUnpublishVolume of the published VolumeAttachment, once deleted",
  async run(rig, _config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    if (rig.server.find("volumeattachments", VA) === undefined) {
      return skipped("no VolumeAttachment (see publish)");
    }
    const detached = await rig.detach(VA);
    if (!detached.ok) {
      return failedWith(
        `status.detachError (${RETRY}; the finalizer stays)`,
        detached.message,
      );
    }
    return passed("answered OK; the finalizer was removed and the VolumeAttachment is gone");
  },
};

const unpublishAgain: Check = {
  id: "unpublish-again",
  title: "the same ControllerUnpublishVolume again (after a restart between the unpublish and " +
    "the finalizer's removal)",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    if (state.published === undefined) return skipped("needs a published volume (see publish)");
    rig.createVa("va-1-again", PV, CHECK_NODE, { nodeId: config.nodeId });
    const detached = await rig.detach("va-1-again");
    if (!detached.ok) {
      return failedWith(
        "the driver must answer OK; status.detachError, the finalizer stays",
        detached.message,
      );
    }
    return passed("answered OK");
  },
};

const readOnly: Check = {
  id: "read-only",
  title: "a read-only PersistentVolume (spec.csi.readOnly: readonly=true)",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    if (!rig.capabilities?.publishReadonly) {
      return skipped("the driver has no PUBLISH_READONLY: the attacher sends readonly=false");
    }
    rig.createPv("pv-ro", config.volumeHandle, spec(config, { readOnly: true }), "read-only");
    rig.createVa("va-ro", "pv-ro", CHECK_NODE);
    return await attachDetach(
      rig,
      config,
      "ro",
      (request) =>
        request.readonly === true ? undefined : "the attacher did not send readonly=true",
    );
  },
};

const block: Check = {
  id: "block",
  title: "a block volume (volumeMode: Block: the block access type)",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    rig.createPv(
      "pv-block",
      config.volumeHandle,
      { ...spec(config), volumeMode: "Block" },
      "volumeMode Block",
    );
    rig.createVa("va-block", "pv-block", CHECK_NODE);
    return await attachDetach(rig, config, "block");
  },
};

const mountOptions: Check = {
  id: "mount-options",
  title: "mountOptions (the mount access type's mount_flags)",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    rig.createPv(
      "pv-mount",
      config.volumeHandle,
      { ...spec(config), volumeMode: "Filesystem", mountOptions: [...config.mountOptions] },
      `mountOptions ${config.mountOptions.join(",")}`,
    );
    rig.createVa("va-mount", "pv-mount", CHECK_NODE);
    return await attachDetach(rig, config, "mount");
  },
};

/** Where a secret value shows, if anywhere: the output so far, logs, the objects' status. */
function secretLeaks(rig: CheckRig, output: readonly string[], values: string[]): string[] {
  const where: string[] = [];
  const contains = (text: string) => values.some((v) => v !== "" && text.includes(v));
  if (output.some(contains)) where.push("the output");
  if (rig.logLines.some(contains)) where.push("the attacher's log");
  const statuses = rig.server.list("volumeattachments").items.map((va) => JSON.stringify(va));
  if (statuses.some(contains)) where.push("a VolumeAttachment");
  return where;
}

/** The secrets check; `output` is what was written so far (it must not show the values). */
export function secretsCheck(output: readonly string[]): Check {
  return {
    id: "secrets",
    title: "controllerPublishSecretRef: the secret sent with publish and unpublish, never shown",
    async run(rig, config, state) {
      const skip = publishSkipReason(rig, state);
      if (skip !== undefined) return skipped(skip);
      rig.createSecret("sandbox-check-secret", config.secret);
      rig.createPv(
        "pv-secret",
        config.volumeHandle,
        spec(config, { secret: "sandbox-check-secret" }),
        "with controllerPublishSecretRef",
      );
      rig.createVa("va-secret", "pv-secret", CHECK_NODE);
      const from = rig.calls.length;
      const result = await attachDetach(
        rig,
        config,
        "secret",
        (request) =>
          request.secrets === "***stripped***" ? undefined : "the attacher did not send the secret",
      );
      const unpublishCall = lastCall(rig, "ControllerUnpublishVolume", from);
      const leaks = secretLeaks(rig, output, Object.values(config.secret));
      if (leaks.length > 0) {
        return { status: "failed", message: `a secret value shows in ${leaks.join(", ")}` };
      }
      if (result.status !== "passed") return result;
      if (unpublishCall?.request.secrets !== "***stripped***") {
        return { status: "failed", message: "the attacher did not send the secret on unpublish" };
      }
      return passed(
        "sent with publish and unpublish; no value in the output, the log or the objects",
      );
    },
  };
}

const DEADLINE_EXCEEDED = "rpc error: code = DeadlineExceeded desc = context deadline exceeded";

const timeout: Check = {
  id: "timeout",
  title: "a ControllerPublishVolume cut off by its deadline, then the attacher's retry",
  async run(rig, config, state) {
    const skip = publishSkipReason(rig, state);
    if (skip !== undefined) return skipped(skip);
    rig.ensureCsiNode(CHECK_NODE, config.nodeId);
    rig.createPv("pv-timeout", config.volumeHandle, spec(config), config.accessMode);
    rig.createVa("va-timeout", "pv-timeout", CHECK_NODE);
    // A deadline of 1 ms stands for a call that passes --timeout: the attacher gives up on it
    // while the driver may still be working on it, then publishes again.
    rig.note("ControllerPublishVolume with a deadline of 1ms");
    const cut = await rig.attach("va-timeout", { handler: rig.handler(1) });
    rig.note(`ControllerPublishVolume with --timeout=${config.timeoutMs / 1000}s`);
    // Answered in time, the call is made again all the same: the driver sees the same pair of
    // calls as after a cut-off one whose work it had finished.
    const retried = await rig.attach("va-timeout", { force: cut.ok });
    const detached = await rig.detach("va-timeout");
    const slowest = rig.calls
      .filter((c) =>
        c.method === "ControllerPublishVolume" || c.method === "ControllerUnpublishVolume"
      )
      .reduce((longest, c) => Math.max(longest, c.ms), 0);
    const first = cut.ok
      ? "answered within 1ms (not cut off; the retry is made all the same)"
      : cut.message === DEADLINE_EXCEEDED
      ? `cut off: the attacher wrote status.attachError "${DEADLINE_EXCEEDED}" and retries`
      : `failed: ${cut.message}`;
    if (!retried.ok) {
      return failedWith(
        `first call ${first}; the retry must succeed, status.attachError (${RETRY})`,
        retried.message,
      );
    }
    if (!detached.ok) return failedWith("status.detachError", detached.message);
    return {
      ...passed(
        `first call ${first}; the retry attached; slowest publish/unpublish of the run ` +
          `${Math.round(slowest)}ms of the ${config.timeoutMs / 1000}s --timeout`,
      ),
      ...(cut.ok ? {} : { attacherText: cut.message }),
    };
  },
};

/** Every check, in order; `output` is what the run wrote so far (see {@link secretsCheck}). */
export function allChecks(output: readonly string[]): Check[] {
  return [
    probe,
    pluginInfo,
    capabilities,
    unpublishNeverPublished,
    publish,
    publishAgain,
    listVolumes,
    listVolumesPaging,
    secondNode,
    unpublish,
    unpublishAgain,
    readOnly,
    block,
    mountOptions,
    secretsCheck(output),
    timeout,
  ];
}

/** The IDs of every check, in order. */
export const CHECK_IDS: readonly string[] = allChecks([]).map((c) => c.id);

/** A new, empty {@link CheckState}. */
export function newCheckState(): CheckState {
  return {};
}
