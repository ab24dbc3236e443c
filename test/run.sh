#!/usr/bin/env bash
# `npm test`: every test, as two vitest runs side by side. The `node` project (the e2e suite on the real
# node, one file at a time under the machine-wide node lock) spends most of its time waiting for the
# kubelet, kaniko and pods, so the `main` project (everything else, two workers) runs beside it instead
# of after it, as one `vitest run` would order them. Arguments go to both runs (a file filter picks from
# each project what matches). The node project's lines are prefixed with "[node] ".
#
# With SLESS_TEST_REPORT set, each run writes its JSON report next to it and the two are merged into it
# (the counts summed, the file results concatenated), as .ci/run reads it; a run that wrote no report
# counts as one failed test.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

report="${SLESS_TEST_REPORT:-}"
vitest_run() {
  local project="$1"
  shift
  SLESS_TEST_REPORT="${report:+$report.$project.json}" npx vitest run --project "$project" --passWithNoTests "$@"
}

rm -f "${report:+$report.node.json}" "${report:+$report.main.json}"
vitest_run node "$@" > >(sed -u 's/^/[node] /') 2>&1 &
node_run=$!
vitest_run main "$@"
main_status=$?
wait "$node_run"
node_status=$?

if [ -n "$report" ]; then
  node -e '
    const fs = require("fs");
    const [out, ...parts] = process.argv.slice(1);
    const reports = parts.map((p) => {
      if (fs.existsSync(p) && fs.statSync(p).size > 0) return JSON.parse(fs.readFileSync(p, "utf8"));
      console.error(`no vitest report ${p}: counted as one failed test`);
      return { numFailedTests: 1, numTotalTests: 1, success: false, testResults: [] };
    });
    const merged = { ...reports[0], testResults: reports.flatMap((r) => r.testResults ?? []) };
    for (const key of Object.keys(merged))
      if (typeof merged[key] === "number" && key !== "startTime")
        merged[key] = reports.reduce((sum, r) => sum + (r[key] ?? 0), 0);
    merged.startTime = Math.min(...reports.map((r) => r.startTime ?? Infinity));
    merged.success = reports.every((r) => r.success);
    fs.writeFileSync(out, JSON.stringify(merged));
  ' "$report" "$report.main.json" "$report.node.json"
fi

[ "$main_status" = 0 ] && [ "$node_status" = 0 ]
