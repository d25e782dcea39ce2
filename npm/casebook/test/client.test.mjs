// The TypeScript client, as installed from the tarballs, against a real `casebook serve` on
// 127.0.0.1:0 over a fresh SQLite store (run by scripts/npm-test.sh from the folder it installed
// into). The dataset files are written here in letta's JSON-lines shape (as examples/tour's).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { Casebook, CasebookError, contentId, dataset } from "casebook";

const bin = join(process.cwd(), "node_modules", ".bin", "casebook");
const home = mkdtempSync(join(tmpdir(), "casebook-npm-"));
const env = { ...process.env, HOME: home, NO_COLOR: "1", CASEBOOK_AUTHOR: "npm-test", CASEBOOK_URL: "", CASEBOOK_TOKEN: "" };
delete env.CASEBOOK_STORE;
// The server's store: a fresh SQLite store in `home`, or the PostgreSQL database
// `CASEBOOK_TEST_STORE` names (scripts/npm-test.sh runs the suite on both when the test
// command's PostgreSQL is there); the clients only ever see the server.
const serverEnv = process.env.CASEBOOK_TEST_STORE ? { ...env, CASEBOOK_STORE: process.env.CASEBOOK_TEST_STORE } : env;
let server;
let url;
let writeKey;
let readKey;

const rows = (n, from = 1) =>
  Array.from({ length: n }, (_, i) => {
    const k = i + from;
    const tags = k % 2 === 0 ? ["even", "topic:billing"] : ["odd"];
    return JSON.stringify({ id: `q${k}`, input: `Question ${k}?`, ground_truth: `answer ${k}`, tags });
  }).join("\n") + "\n";

/** The command on the server's store (`init`, `keys create`). */
function casebook(...args) {
  return execFileSync(bin, args, { cwd: home, env: serverEnv, encoding: "utf8" });
}

before(async () => {
  casebook("init");
  writeKey = casebook("keys", "create", "--project", "evals", "--scope", "write").trim().split(/\s+/).find((w) => w.startsWith("cb_"));
  readKey = casebook("keys", "create", "--project", "evals", "--scope", "read").trim().split(/\s+/).find((w) => w.startsWith("cb_"));
  assert.ok(writeKey && readKey, "keys were made");
  server = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--quiet"], { cwd: home, env: serverEnv, stdio: ["ignore", "pipe", "inherit"] });
  const lines = createInterface({ input: server.stdout });
  url = await new Promise((resolve, reject) => {
    lines.once("line", (line) => resolve(line.trim()));
    server.once("exit", (code) => reject(new Error(`casebook serve exited with ${code}`)));
  });
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
});

after(async () => {
  if (!server || server.exitCode !== null) return;
  const exited = once(server, "exit");
  server.kill("SIGTERM");
  const timer = setTimeout(() => server.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(timer);
});

test("push makes versions; dataset() reads a pinned version page by page with a filter", async () => {
  const client = new Casebook({ url, token: writeKey });
  const first = await client.push("support", rows(25), { message: "first", filename: "support.jsonl" });
  assert.equal(first.created, true);
  assert.equal(first.version?.number, 1);
  assert.equal(first.version?.cases, 25);
  await client.push("support", rows(30), { message: "second", filename: "support.jsonl" });

  const pinned = client.dataset("support@v1", { pageSize: 10 });
  const pages = [];
  for await (const page of pinned.pages()) pages.push(page);
  assert.deepEqual(pages.map((p) => p.cases.length), [10, 10, 5]);
  assert.ok(pages.every((p) => p.version === 1));
  assert.equal((await pinned.version()).message, "first");

  const even = await client.dataset("support", { where: 'labels contains "even"', pageSize: 4 }).toArray();
  assert.equal(even.length, 15, "the head (v2) has 15 even cases");
  assert.deepEqual(even.slice(0, 3).map((c) => c.id), ["q2", "q4", "q6"]);
  assert.equal(even[0].expected.output, "answer 2");

  // Native cases pushed as objects round-trip through pull.
  const report = await client.push("native", [{ id: "n1", input: "hi", expected: { output: "hello" }, labels: ["greeting"] }]);
  assert.equal(report.version?.cases, 1);
  const pulled = await client.pull("native@v1");
  assert.deepEqual(JSON.parse(pulled.trim().split("\n").at(-1)), { id: "n1", input: "hi", expected: { output: "hello" }, labels: ["greeting"] });
});

test("the module's functions read CASEBOOK_URL and CASEBOOK_TOKEN", async () => {
  process.env.CASEBOOK_URL = url;
  process.env.CASEBOOK_TOKEN = readKey;
  try {
    let n = 0;
    for await (const c of dataset("support@v1", { where: 'label.topic == "billing"' })) n += c.id ? 1 : 0;
    assert.equal(n, 12);
  } finally {
    delete process.env.CASEBOOK_URL;
    delete process.env.CASEBOOK_TOKEN;
  }
});

test("a run logged from the user's loop is a casebook run: casebook results reads it", async () => {
  const client = new Casebook({ url, token: writeKey });
  const run = await client.run("support@v1", { name: "loop", threshold: 0.5 });
  let i = 0;
  for await (const c of run.cases({ pageSize: 7 })) {
    i += 1;
    if (i === 3) {
      await run.log(c, { error: new Error("the agent timed out") });
      continue;
    }
    const output = i % 4 === 0 ? "wrong" : c.expected.output;
    await run.log(c, {
      output,
      scores: { exact: output === c.expected.output ? 1 : 0 },
      trajectory: [{ type: "message", role: "assistant", content: output }],
      millis: 5,
    });
  }
  const stored = await run.finish();
  assert.equal(stored.id, run.id);
  assert.ok(stored.finished);
  const totals = stored.summary.totals;
  assert.deepEqual([totals.results, totals.passed, totals.failed, totals.errors], [25, 18, 6, 1]);
  assert.equal(stored.summary.meta.dataset, "support");
  assert.equal(stored.summary.meta.dataset_version_id, run.version.id);

  // The CLI, through the same server, shows it as it shows its own runs.
  const shown = JSON.parse(
    execFileSync(bin, ["results", run.id, "--format", "json"], {
      cwd: home,
      env: { ...env, CASEBOOK_URL: url, CASEBOOK_TOKEN: readKey },
      encoding: "utf8",
    }),
  );
  assert.equal(shown.meta.run_id, run.id);
  assert.equal(shown.totals.passed, 18);
  assert.equal(shown.threshold_met, true);

  await assert.rejects(run.log({ id: "q1" }, { output: "late" }), /is finished/);

  // Each result carries its case's content id in the version run, as the server's history of
  // the case gives it (and `casebook run` and the Python client record it).
  const results = execFileSync(bin, ["results", run.id, "--format", "jsonl"], {
    cwd: home,
    env: { ...env, CASEBOOK_URL: url, CASEBOOK_TOKEN: readKey },
    encoding: "utf8",
  })
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));
  assert.equal(results.length, 25);
  const q2 = results.find((r) => r.case_id === "q2");
  const history = await (
    await client.request("GET", `/api/v1/projects/evals/datasets/support/cases/q2/history`)
  ).json();
  const inV1 = history.revisions.find((r) => r.from_version <= 1 && (r.to_version ?? Infinity) > 1);
  assert.match(q2.case_content_id, /^[0-9a-f]{64}$/);
  assert.equal(q2.case_content_id, inV1.content_id);
  assert.ok(results.every((r) => /^[0-9a-f]{64}$/.test(r.case_content_id)), "every result has its case's content id");
  // The pages say them too, and `contentId` reads them off a case.
  const [page] = await (async () => {
    for await (const p of client.dataset("support@v1", { pageSize: 3 }).pages()) return [p];
  })();
  assert.equal(page.contentIds.length, 3);
  assert.equal(contentId(page.cases[1]), page.contentIds[1]);
  assert.equal(contentId({ id: "made-here" }), undefined);
});

test("errors are CasebookErrors naming the server and the reason", async () => {
  const bad = new Casebook({ url, token: "cb_nope_nope" });
  await assert.rejects(bad.datasets(), (error) => {
    assert.ok(error instanceof CasebookError);
    assert.equal(error.server, url);
    assert.equal(error.status, 401);
    assert.equal(error.code, "unauthorized");
    assert.match(error.message, new RegExp(`^casebook server ${url}: `));
    return true;
  });

  const client = new Casebook({ url, token: readKey });
  await assert.rejects(client.dataset("support", { where: "labels contains" }).toArray(), (error) => {
    assert.equal(error.code, "invalid-filter");
    assert.equal(error.status, 400);
    return true;
  });
  await assert.rejects(client.version("nosuch@v1"), (error) => error.code === "not-found" && /nosuch/.test(error.reason));
  await assert.rejects(client.push("support", rows(2)), (error) => error.status === 403 && error.code === "forbidden");

  // A port nothing listens on: one just let go.
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const closed = `http://127.0.0.1:${probe.address().port}`;
  probe.close();
  await once(probe, "close");
  const nobody = new Casebook({ url: closed, token: readKey });
  await assert.rejects(nobody.datasets(), (error) => {
    assert.equal(error.code, "network");
    assert.equal(error.status, 0);
    assert.equal(error.message, `casebook server ${closed}: cannot reach the server (ECONNREFUSED)`);
    return true;
  });
  assert.throws(() => new Casebook({ url, token: "" }), /no API key: pass `token` or set `CASEBOOK_TOKEN`/);
});

test("the launcher passes the binary's exit status and output through", () => {
  let failed;
  try {
    execFileSync(bin, ["validate", "missing.jsonl"], { cwd: home, env, encoding: "utf8", stdio: "pipe" });
  } catch (error) {
    failed = error;
  }
  assert.equal(failed?.status, 2, "a missing file is exit 2");
  assert.match(failed.stderr, /missing\.jsonl/);
  assert.match(casebook("--version"), /^casebook \d+\.\d+\.\d+/);
});
