import assert from "node:assert/strict";
import { leaderElectionNamespace, leaderIdentity, leaseName } from "./config.ts";

Deno.test("leaderElectionNamespace() falls back from the flag to POD_NAMESPACE, the service-account file and default", () => {
  let reads = 0;
  const file = (content: string | undefined) => () => {
    reads++;
    return content;
  };
  assert.equal(
    leaderElectionNamespace({
      flag: "ns-flag",
      podNamespaceEnv: "ns-env",
      readServiceAccountNamespace: file("x"),
    }),
    "ns-flag",
  );
  assert.equal(
    leaderElectionNamespace({
      flag: "",
      podNamespaceEnv: "ns-env",
      readServiceAccountNamespace: file("x"),
    }),
    "ns-env",
  );
  assert.equal(reads, 0, "the file is read only when needed");
  assert.equal(
    leaderElectionNamespace({
      flag: "",
      podNamespaceEnv: "",
      readServiceAccountNamespace: file(" ns-sa\n"),
    }),
    "ns-sa",
  );
  assert.equal(
    leaderElectionNamespace({ flag: "", readServiceAccountNamespace: file(" \n") }),
    "default",
  );
  assert.equal(
    leaderElectionNamespace({ flag: "", readServiceAccountNamespace: file(undefined) }),
    "default",
  );
  assert.equal(leaderElectionNamespace({ flag: "" }), "default");
});

Deno.test("leaderIdentity() sanitises the hostname like driver names", () => {
  assert.equal(leaderIdentity("node-1"), "node-1");
  assert.equal(leaderIdentity("node_1.example.com"), "node-1-example-com");
  assert.equal(leaderIdentity("host."), "host-X");
  assert.equal(leaderIdentity(""), "");
});

Deno.test("leaseName() sanitizes the whole lock name", () => {
  assert.equal(leaseName("ebs.csi.aws.com"), "external-attacher-leader-ebs-csi-aws-com");
  assert.equal(leaseName("x/"), "external-attacher-leader-x-X");
});
