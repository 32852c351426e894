import assert from "node:assert/strict";
import { labelValuesQuery, substitute } from "./monitoring.ts";
import { panelQueries, VARIABLES } from "../../../deploy/monitoring/source/dashboard.ts";

Deno.test("labelValuesQuery() turns Grafana's label_values() into PromQL", () => {
  assert.equal(
    labelValuesQuery('label_values(workqueue_depth{name="csi-attacher-va"}, job)'),
    'group by (job) (workqueue_depth{name="csi-attacher-va"})',
  );
  assert.throws(() => labelValuesQuery("up"), /not a label_values\(\) query/);
});

Deno.test("substitute() leaves no dashboard variable in any query scenario 21 runs", () => {
  const vars = {
    container: "csi-attacher",
    job: "kube-system/csi-attacher",
    instance: "127.0.0.1:8080",
    driver: "csi.example.com",
  };
  const all = [
    ...panelQueries().map((q) => q.expr),
    ...VARIABLES.map((v) => labelValuesQuery(v.query)),
  ];
  for (const expr of all) assert.doesNotMatch(substitute(expr, vars), /\$/, expr);
  assert.match(substitute(panelQueries()[0]!.expr, vars), /instance=~"127.0.0.1:8080"/);
});
