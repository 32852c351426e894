/**
 * CSI migration: in-tree PersistentVolume sources translated to the CSI source of the driver that
 * replaced them, as csi-translation-lib v0.34 does (k8s.io/csi-translation-lib `translate.go` and
 * `plugins/*.go`), for all seven plugins it knows: GCE PD, AWS EBS, OpenStack Cinder, Azure Disk,
 * Azure File, vSphere and Portworx.
 *
 * Only what the attacher reads is produced: `spec.csi`, and the access modes where the
 * translation rewrites them (GCE PD). The node-affinity rewrite that csi-translation-lib also
 * does (zone labels to CSI topology keys, e.g. `plugins/vsphere_volume.go`
 * `translateTopologyFromInTreevSphereToCSI`) is left out: attach and detach never look at it.
 *
 * Inline volumes need no translation here: kube-controller-manager translates an in-tree inline
 * volume (csi-translation-lib's `TranslateInTreeInlineVolumeToCSI`) before it creates the
 * VolumeAttachment, whose `inlineVolumeSpec` then carries the CSI source.
 *
 * @module
 */

import type {
  AzureDiskVolumeSource,
  AzureFilePersistentVolumeSource,
  CsiPersistentVolumeSource,
  GcePersistentDiskVolumeSource,
  PersistentVolume,
  PersistentVolumeSpec,
  VsphereVirtualDiskVolumeSource,
} from "../kube/types.ts";
import { errorText } from "../errors.ts";

/** The in-tree volume source fields that CSI migration covers, with their CSI driver names. */
const MIGRATABLE_SOURCES: Record<string, string> = {
  gcePersistentDisk: "pd.csi.storage.gke.io",
  awsElasticBlockStore: "ebs.csi.aws.com",
  cinder: "cinder.csi.openstack.org",
  azureDisk: "disk.csi.azure.com",
  azureFile: "file.csi.azure.com",
  vsphereVolume: "csi.vsphere.vmware.com",
  portworxVolume: "pxd.portworx.com",
};

/** CSI driver names that are CSI-migration targets (their metrics get a `migrated` label). */
export const MIGRATION_DRIVER_NAMES: ReadonlySet<string> = new Set(
  Object.values(MIGRATABLE_SOURCES),
);

/** Whether the PV uses an in-tree source that CSI migration translates. */
export function isMigratablePersistentVolume(pv: PersistentVolume): boolean {
  return Object.keys(MIGRATABLE_SOURCES).some((key) => pv.spec?.[key] != null);
}

const ZONE_LABELS = ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"];
const UNSPECIFIED = "UNSPECIFIED";

/**
 * ReadWriteMany was never validated in-tree and meant ReadWriteOnce; ROX+RWO meant RWO.
 * The result is what csi-translation-lib gives the GCE PD translation (the only one that
 * rewrites access modes).
 */
function backwardCompatibleAccessModes(
  modes: readonly string[] | null | undefined,
): string[] | null {
  if (!modes) return null;
  const set = new Set(modes.map((m) => m === "ReadWriteMany" ? "ReadWriteOnce" : m));
  if (set.has("ReadWriteOnce")) return ["ReadWriteOnce"];
  if (set.has("ReadOnlyMany")) return ["ReadOnlyMany"];
  return ["ReadWriteOnce"];
}

/** Parts of a GCE PD handle (`projects/p/zones/z/disks/d`) and of a GCE node ID. */
const GCE_ID_PARTS = 6;

/** The one region of GCE zones `{locale}-{region}-{zone}`, as csi-translation-lib derives it. */
function regionFromZones(zones: readonly string[]): string {
  if (zones.length < 1) throw new Error("no zones specified");
  const regions = new Set<string>();
  for (const zone of zones) {
    const parts = zone.split("-");
    if (parts.length !== 3) {
      throw new Error(
        `zone in unexpected format, expected: {locale}-{region}-{zone}, got: ${zone}`,
      );
    }
    regions.add(parts.slice(0, 2).join("-"));
  }
  if (regions.size !== 1) {
    throw new Error(`multiple or no regions gotten from zones, got: [${[...regions].join(" ")}]`);
  }
  return [...regions][0]!;
}

function gceVolumeHandle(pv: PersistentVolume, pdName: string): string {
  const labels = pv.metadata.labels ?? {};
  const zoneValue = ZONE_LABELS.map((l) => labels[l]).find((v) => v);
  if (!zoneValue) return `projects/${UNSPECIFIED}/zones/${UNSPECIFIED}/disks/${pdName}`;
  const zones = zoneValue.split("__");
  if (zones.length === 1) return `projects/${UNSPECIFIED}/zones/${zones[0]}/disks/${pdName}`;
  let region: string;
  try {
    region = regionFromZones(zones);
  } catch (err) {
    throw new Error(`failed to get region from zones: ${errorText(err)}`, { cause: err });
  }
  return `projects/${UNSPECIFIED}/regions/${region}/disks/${pdName}`;
}

/**
 * The EBS volume ID of an in-tree volume ID, as csi-translation-lib's
 * `KubernetesVolumeIDToEBSVolumeID`: a bare ID is kept; `aws://<zone>/vol-123` and
 * `aws:///vol-123` give `vol-123`; anything else under `aws://` is an error.
 */
function ebsVolumeId(kubernetesID: string): string {
  if (!kubernetesID.startsWith("aws://")) return kubernetesID;
  let path: string;
  try {
    path = decodeURIComponent(new URL(kubernetesID).pathname);
  } catch (err) {
    throw new Error(`Invalid disk name (${kubernetesID}): ${errorText(err)}`, { cause: err });
  }
  const id = path.replace(/^\/+|\/+$/g, "");
  if (!/^vol-[^/]*$/.test(id)) throw new Error(`Invalid format for AWS volume (${kubernetesID})`);
  return id;
}

/** csi-translation-lib `plugins/azure_disk.go`: the only kind of disk the CSI driver serves. */
const AZURE_MANAGED_DISK = "Managed";

/**
 * The CSI source of an in-tree Azure Disk, as csi-translation-lib's
 * `azureDiskCSITranslator.TranslateInTreePVToCSI`: the handle is the disk URI, and the caching
 * mode, fsType and kind go into the volume attributes (lower-case keys, as the Azure Disk CSI
 * driver's parameters are named).
 */
function azureDiskSource(disk: AzureDiskVolumeSource): CsiPersistentVolumeSource {
  if (disk.kind != null && disk.kind.toLowerCase() !== AZURE_MANAGED_DISK.toLowerCase()) {
    throw new Error(`kind(${disk.kind}) is not supported in csi migration`);
  }
  const volumeAttributes: Record<string, string> = { kind: AZURE_MANAGED_DISK };
  if (disk.cachingMode != null) volumeAttributes.cachingmode = disk.cachingMode;
  if (disk.fsType != null) volumeAttributes.fstype = disk.fsType;
  return {
    driver: MIGRATABLE_SOURCES.azureDisk!,
    volumeHandle: disk.diskURI,
    readOnly: disk.readOnly ?? false,
    fsType: disk.fsType ?? "",
    volumeAttributes,
  };
}

/** csi-translation-lib `plugins/azure_file.go`: the secret name the in-tree plugin generated. */
const AZURE_STORAGE_ACCOUNT_SECRET = /azure-storage-account-(.+)-secret/;
/**
 * csi-translation-lib `plugins/azure_file.go`: where a PV names its resource group (part of the
 * translated volume handle, so the PV cache keeps it).
 */
export const AZURE_FILE_RESOURCE_GROUP_ANNOTATION = "kubernetes.io/azure-file-resource-group";

/**
 * The CSI source of an in-tree Azure File share, as csi-translation-lib's
 * `azureFileCSITranslator.TranslateInTreePVToCSI`: the handle is
 * `<resource group>#<storage account>#<share>#<PV name>#<secret namespace>`. The account is read
 * from a secret named `azure-storage-account-<account>-secret`, else it is the secret name
 * itself; the secret namespace is the source's, else the claim's, and one of them is required.
 */
function azureFileSource(
  pv: PersistentVolume,
  file: AzureFilePersistentVolumeSource,
): CsiPersistentVolumeSource {
  const account = AZURE_STORAGE_ACCOUNT_SECRET.exec(file.secretName)?.[1] ?? file.secretName;
  const resourceGroup = pv.metadata.annotations?.[AZURE_FILE_RESOURCE_GROUP_ANNOTATION] ?? "";
  const claimNamespace = pv.spec.claimRef?.namespace;
  const namespace = file.secretNamespace != null
    ? file.secretNamespace
    : typeof claimNamespace === "string"
    ? claimNamespace
    : "";
  if (namespace === "") {
    throw new Error("could not find a secret namespace in PersistentVolumeSource or ClaimRef");
  }
  return {
    driver: MIGRATABLE_SOURCES.azureFile!,
    volumeHandle: [resourceGroup, account, file.shareName, pv.metadata.name, namespace].join("#"),
    readOnly: file.readOnly ?? false,
    fsType: "",
    volumeAttributes: { sharename: file.shareName },
    nodeStageSecretRef: { name: file.secretName, namespace },
  };
}

/**
 * The CSI source of an in-tree vSphere volume, as csi-translation-lib's
 * `vSphereCSITranslator.TranslateInTreePVToCSI`: the handle is the volume path, and a storage
 * policy name goes into the volume attributes.
 */
function vsphereSource(disk: VsphereVirtualDiskVolumeSource): CsiPersistentVolumeSource {
  const volumeAttributes: Record<string, string> = {};
  if (disk.storagePolicyName) volumeAttributes.storagepolicyname = disk.storagePolicyName;
  return {
    driver: MIGRATABLE_SOURCES.vsphereVolume!,
    volumeHandle: disk.volumePath,
    readOnly: false,
    fsType: disk.fsType ?? "",
    volumeAttributes,
  };
}

/**
 * The CSI source of an in-tree GCE PD, as csi-translation-lib's
 * `gcePersistentDiskCSITranslator.TranslateInTreePVToCSI`: the handle from the PV's zone labels,
 * the partition as a string (empty for 0).
 */
function gcePersistentDiskSource(
  pv: PersistentVolume,
  gce: GcePersistentDiskVolumeSource,
): CsiPersistentVolumeSource {
  const partition = gce.partition ?? 0;
  return {
    driver: MIGRATABLE_SOURCES.gcePersistentDisk!,
    volumeHandle: gceVolumeHandle(pv, gce.pdName),
    readOnly: gce.readOnly ?? false,
    fsType: gce.fsType ?? "",
    volumeAttributes: { partition: partition === 0 ? "" : String(partition) },
  };
}

/** The in-tree AWS EBS source's fields the translation reads. */
interface EbsVolumeSource {
  volumeID: string;
  fsType?: string;
  partition?: number;
  readOnly?: boolean;
}

/**
 * The CSI source of an in-tree AWS EBS volume, as csi-translation-lib's
 * `awsElasticBlockStoreCSITranslator.TranslateInTreePVToCSI`. Unlike GCE PD, the EBS translation
 * keeps the access modes and always sets the partition.
 */
function ebsSource(ebs: EbsVolumeSource): CsiPersistentVolumeSource {
  let volumeHandle: string;
  try {
    volumeHandle = ebsVolumeId(ebs.volumeID);
  } catch (err) {
    throw new Error(`failed to translate Kubernetes ID to EBS Volume ID ${errorText(err)}`, {
      cause: err,
    });
  }
  return {
    driver: MIGRATABLE_SOURCES.awsElasticBlockStore!,
    volumeHandle,
    readOnly: ebs.readOnly ?? false,
    fsType: ebs.fsType ?? "",
    volumeAttributes: { partition: String(ebs.partition ?? 0) },
  };
}

/** An in-tree source named by a volume ID alone (Cinder, Portworx). */
interface VolumeIdSource {
  volumeID: string;
  fsType?: string;
  readOnly?: boolean;
}

/**
 * The CSI source of an in-tree Cinder or Portworx volume, as csi-translation-lib's
 * `osCinderCSITranslator` and `portworxCSITranslator` give it: the volume ID is the handle.
 */
function volumeIdSource(driver: string, source: VolumeIdSource): CsiPersistentVolumeSource {
  return {
    driver,
    volumeHandle: source.volumeID,
    readOnly: source.readOnly ?? false,
    fsType: source.fsType ?? "",
    volumeAttributes: {},
  };
}

/**
 * Returns a copy of `pv` whose spec uses a CSI source in place of its in-tree source.
 *
 * @throws {Error} when the source cannot be translated.
 */
export function translateInTreePersistentVolume(pv: PersistentVolume): PersistentVolume {
  const out: PersistentVolume = structuredClone(pv);
  const spec: PersistentVolumeSpec = out.spec;
  if (spec.gcePersistentDisk) {
    spec.csi = gcePersistentDiskSource(pv, spec.gcePersistentDisk);
    spec.accessModes = backwardCompatibleAccessModes(spec.accessModes);
    delete spec.gcePersistentDisk;
    return out;
  }
  const ebs = spec.awsElasticBlockStore as EbsVolumeSource | undefined;
  if (ebs) {
    spec.csi = ebsSource(ebs);
    delete spec.awsElasticBlockStore;
    return out;
  }
  for (const key of ["cinder", "portworxVolume"] as const) {
    const source = spec[key] as VolumeIdSource | undefined;
    if (!source) continue;
    spec.csi = volumeIdSource(MIGRATABLE_SOURCES[key]!, source);
    delete spec[key];
    return out;
  }
  if (spec.azureDisk) {
    spec.csi = azureDiskSource(spec.azureDisk);
    delete spec.azureDisk;
    return out;
  }
  if (spec.azureFile) {
    spec.csi = azureFileSource(pv, spec.azureFile);
    delete spec.azureFile;
    return out;
  }
  if (spec.vsphereVolume) {
    spec.csi = vsphereSource(spec.vsphereVolume);
    delete spec.vsphereVolume;
    return out;
  }
  const source = Object.keys(MIGRATABLE_SOURCES).find((k) => spec[k] != null);
  throw new Error(`translation of in-tree ${source ?? "unknown"} volumes is not supported`);
}

/**
 * Fills in the parts of a translated GCE PD handle that translation could not know, as
 * csi-translation-lib's `RepairVolumeHandle`: a handle whose project is UNSPECIFIED takes the
 * project (and an UNSPECIFIED zone, or the region of the node's zone) from the node ID
 * `projects/<project>/zones/<zone>/instances/<name>`. Handles of other migration drivers are
 * returned unchanged.
 *
 * @throws {Error} when the handle or the node ID has too few parts, or the handle is neither
 * zonal nor regional; the reconciler then skips the VolumeAttachment.
 */
export function repairVolumeHandle(driver: string, volumeHandle: string, nodeID: string): string {
  if (driver !== MIGRATABLE_SOURCES.gcePersistentDisk) return volumeHandle;
  const tok = volumeHandle.split("/");
  if (tok.length < GCE_ID_PARTS) {
    throw new Error(
      `volume handle has wrong number of elements; got ${tok.length}, wanted ${GCE_ID_PARTS} or more`,
    );
  }
  if (tok[1] !== UNSPECIFIED) return volumeHandle;
  const node = nodeID.split("/");
  if (node.length < GCE_ID_PARTS) {
    throw new Error(
      `node handle has wrong number of elements; got ${node.length}, wanted ${GCE_ID_PARTS} or more`,
    );
  }
  const [, , regionality, where, , disk] = tok;
  const nodeProject = node[1];
  const nodeZone = node[3] ?? "";
  switch (regionality) {
    case "zones": {
      const zone = where === UNSPECIFIED ? nodeZone : where;
      return `projects/${nodeProject}/zones/${zone}/disks/${disk}`;
    }
    case "regions": {
      let region = where;
      if (where === UNSPECIFIED) {
        try {
          region = regionFromZones([nodeZone]);
        } catch (err) {
          throw new Error(`failed to get region from zone ${nodeZone}: ${errorText(err)}`, {
            cause: err,
          });
        }
      }
      return `projects/${nodeProject}/regions/${region}/disks/${disk}`;
    }
    default:
      throw new Error(
        `expected volume handle to have zones or regions regionality value, got: ${regionality}`,
      );
  }
}
