// The package as another app gets it: `npm pack`, then a fresh app in a
// temporary directory installs the tarball with the newest releases of
// @bufbuild/protobuf, @connectrpc/connect, @connectrpc/connect-node,
// typescript and @types/node that this Node.js can run (their
// engines.node), from npm, compiles the README's example
// with `tsc --strict`, and runs it against the real server over Connect
// and over gRPC (h2c); a second program of the app walks pages and has
// a 429 retried, over both. It needs the npm registry.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { startServer } from "./server.js";

const run = promisify(execFile);
const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const newestPackages = ["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-node", "typescript", "@types/node"];

// npm in the app must not see the settings `npm test` exports for this
// package (npm_config_local_prefix and the like).
const npmEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
const npm = (cwd, ...args) => run("npm", args, { cwd, env: npmEnv, maxBuffer: 16 << 20 });

let srv;
let tmp;
let app;
let packed;

// satisfies reports whether version (x.y.z) meets an engines range of the
// forms packages use (">=20", "^18.17.0 || >=20", ">=14.17 <23", "*"):
// each alternative of || holds when all its comparators do.
function satisfies(version, range) {
  if (!range || range.trim() === "" || range.trim() === "*") {
    return true;
  }
  const v = version.replace(/^v/, "").split(".").map(Number);
  const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
  return range.split("||").some((alt) =>
    alt.trim().split(/\s+/).every((c) => {
      const m = /^(>=|<=|>|<|=|\^|~)?v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?$/.exec(c);
      if (!m) {
        return true; // a form this check does not know: let npm judge
      }
      const w = [Number(m[2]), Number(m[3]) || 0, Number(m[4]) || 0];
      const d = cmp(v, w);
      switch (m[1]) {
        case ">=": return d >= 0;
        case ">": return d > 0;
        case "<=": return d <= 0;
        case "<": return d < 0;
        case "^": return d >= 0 && v[0] === w[0];
        case "~": return d >= 0 && v[0] === w[0] && v[1] === w[1];
        default: {
          // "20", "20.x", "20.1", "20.1.x", "20.1.2": the parts given.
          const given = [m[2], m[3], m[4]].filter((p) => p !== undefined && /^\d+$/.test(p)).length;
          return v.slice(0, given).every((n, i) => n === w[i]);
        }
      }
    }));
}

// newest is the newest release of name that this Node.js can run (its
// engines.node): "latest" may need a newer Node.js than the machine's, or
// name a version the registry does not serve yet.
async function newest(name) {
  const { stdout } = await npm(tmp, "view", name, "versions", "--json");
  const versions = [].concat(JSON.parse(stdout)).filter((v) => !v.includes("-")).reverse();
  for (const v of versions.slice(0, 20)) {
    const { stdout: e } = await npm(tmp, "view", `${name}@${v}`, "engines", "--json");
    const engines = e.trim() === "" ? {} : JSON.parse(e);
    if (satisfies(process.version, engines?.node)) {
      return `${name}@${v}`;
    }
  }
  throw new Error(`no release of ${name} among the newest 20 runs on Node.js ${process.version}`);
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "partnerapi-ts-app-"));
  app = join(tmp, "app");
  // The server starts while npm packs and installs. The pack uses the
  // dist/ that `npm run build` (make test-ts) wrote: with the prepack
  // build it would rewrite dist/ under the other test files.
  const installing = (async () => {
    const { stdout } = await npm(pkgDir, "pack", "--ignore-scripts", "--json", "--pack-destination", tmp);
    packed = JSON.parse(stdout)[0];
    await run("mkdir", [app]);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "fresh-app", private: true, type: "module" }, null, 2));
    const peers = await Promise.all(newestPackages.map(newest));
    // @connectrpc/connect-node wants @connectrpc/connect of its own
    // version exactly: the newest connect-node this Node.js runs decides.
    const node = peers.find((p) => p.startsWith("@connectrpc/connect-node@"));
    const i = peers.findIndex((p) => p.startsWith("@connectrpc/connect@"));
    peers[i] = `@connectrpc/connect@${node.split("@").at(-1)}`;
    await npm(app, "install", "--no-audit", "--no-fund", join(tmp, packed.filename), ...peers);
  })();
  // The server is kept even when the install fails, so that after()
  // stops it (a server left running keeps the test process alive).
  const [started, installed] = await Promise.allSettled([startServer(), installing]);
  if (started.status === "fulfilled") {
    srv = started.value;
  }
  for (const r of [started, installed]) {
    if (r.status === "rejected") {
      throw r.reason;
    }
  }
});

after(async () => {
  await srv?.stop();
  if (tmp) {
    rmSync(tmp, { recursive: true, force: true });
  }
});

const readJSON = (...path) => JSON.parse(readFileSync(join(...path), "utf8"));

test("the tarball is publishable: dist, README and LICENSE, peer dependencies over ranges", () => {
  const files = packed.files.map((f) => f.path);
  for (const want of ["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts", "dist/pages.js", "dist/client-credentials.d.ts"]) {
    assert.ok(files.includes(want), `${want} is packed`);
  }
  assert.ok(!files.some((f) => f.startsWith("test/") || f.startsWith("node_modules/") || f.startsWith("examples/")), "nothing but the package");
  assert.equal(readFileSync(join(app, "node_modules/@svat/partnerapi-client/LICENSE"), "utf8"), readFileSync(join(pkgDir, "../../LICENSE"), "utf8"));

  const pkg = readJSON(app, "node_modules/@svat/partnerapi-client/package.json");
  assert.equal(pkg.private, undefined);
  assert.equal(pkg.license, "MIT");
  assert.deepEqual(Object.keys(pkg.dependencies ?? {}), [], "no dependencies of its own: every copy would be a second one");
  for (const peer of ["@bufbuild/protobuf", "@connectrpc/connect"]) {
    assert.match(pkg.peerDependencies[peer], /^\^2\./, `${peer} is a peer over a range`);
  }
});

test("the fresh app has the newest peers, once each", async (t) => {
  for (const name of newestPackages) {
    t.diagnostic(`${name} ${readJSON(app, "node_modules", name, "package.json").version}`);
  }
  assert.ok(!existsSync(join(app, "node_modules/@svat/partnerapi-client/node_modules")), "no copy of its own");
  const { stdout } = await npm(app, "ls", "--all", "--json", "@bufbuild/protobuf");
  const versions = new Set();
  const walk = (deps) => {
    for (const [name, d] of Object.entries(deps ?? {})) {
      if (name === "@bufbuild/protobuf") versions.add(d.version);
      walk(d.dependencies);
    }
  };
  walk(JSON.parse(stdout).dependencies);
  assert.equal(versions.size, 1, `one @bufbuild/protobuf: ${[...versions]}`);
});

// The README's example, as written: the ```ts block under "## Example".
function readmeExample() {
  const readme = readFileSync(join(app, "node_modules/@svat/partnerapi-client/README.md"), "utf8");
  const section = readme.slice(readme.indexOf("\n## Example\n"));
  const m = section.match(/```ts\n([\s\S]*?)```/);
  assert.ok(m, "the README has an example");
  return m[1];
}

let compiled;
function compile() {
  compiled ??= (async () => {
    writeFileSync(join(app, "example.ts"), readmeExample());
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
      compilerOptions: { module: "nodenext", target: "es2022", types: ["node"], outDir: "out", skipLibCheck: false },
      files: ["example.ts"],
    }, null, 2));
    try {
      await run(join(app, "node_modules/.bin/tsc"), ["-p", ".", "--strict"], { cwd: app });
    } catch (err) {
      throw new Error(`tsc --strict failed:\n${err.stdout}${err.stderr}`);
    }
    return join(app, "out/example.js");
  })();
  return compiled;
}

test("the README example compiles with tsc --strict", async () => {
  assert.ok(existsSync(await compile()));
  // examples/readme.ts is the same code, type-checked by `npm run build`
  // against the pinned (oldest supported) versions.
  assert.equal(readmeExample(), readFileSync(join(pkgDir, "examples/readme.ts"), "utf8"), "examples/readme.ts is the README's example");
});

for (const transport of ["connect", "grpc"]) {
  test(`the README example runs over ${transport}`, async () => {
    const example = await compile();
    const client = srv.client(`Fresh App ${transport}`);
    const { stdout } = await run(process.execPath, [example], {
      cwd: app,
      env: { ...process.env, BASE_URL: srv.publicURL, CLIENT_ID: client.clientId, CLIENT_SECRET: client.clientSecret, TRANSPORT: transport },
    });
    const lines = stdout.trim().split("\n");
    assert.equal(lines[0], `workspace Fresh App ${transport} contacts:read contacts:write leads:read leads:write`);
    assert.match(lines[1], /^lead lea_\S+ con_\S+$/);
    assert.equal(lines[2], `contact ${lines[1].split(" ")[2]} Grace`);
    assert.equal(lines[3], "contacts 1");
    assert.equal(lines[4], "validation_failed email invalid_format");
  });
}

// pagesAndRetry is a program of the fresh app, compiled with `tsc
// --strict` against the newest peers like the README example: with a
// client whose read rate is 1 a second (burst 2), it creates 5 contacts,
// then reads /me and walks them with pages (limit 2: three pages). The
// reads beyond the burst are refused with 429 / ResourceExhausted, and
// clientCredentials retries them after the wait the server names; the
// program prints what it saw as JSON.
const pagesAndRetry = `import { ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ContactService, IdentityService, clientCredentials, errorDetails, pages } from "@svat/partnerapi-client";

const baseUrl = process.env.BASE_URL!;
const attempts: { method: string; code?: number; wait?: number; start: number; end?: number }[] = [];
const spy: Interceptor = (next) => async (req) => {
  const attempt: (typeof attempts)[number] = { method: req.method.name, start: performance.now() };
  attempts.push(attempt);
  try {
    return await next(req);
  } catch (err) {
    const ce = ConnectError.from(err);
    Object.assign(attempt, { code: ce.code, wait: errorDetails(ce).retryAfterSeconds, end: performance.now() });
    throw err;
  }
};
const interceptors = [clientCredentials({ baseUrl, clientId: process.env.CLIENT_ID!, clientSecret: process.env.CLIENT_SECRET! }), spy];
const transport =
  process.env.TRANSPORT === "grpc"
    ? createGrpcTransport({ baseUrl, interceptors })
    : createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors });

const contacts = createClient(ContactService, transport);
const made: string[] = [];
for (let i = 0; i < 5; i++) {
  const { contact } = await contacts.createContact({ contact: { email: \`fresh\${i}@example.com\` } });
  made.push(contact?.id ?? "");
}
const me = await createClient(IdentityService, transport).getMe({});
const seen: string[] = [];
for await (const c of pages(contacts.listContacts, { limit: 2, sort: "createdAt" })) {
  seen.push(c.id);
}
// The wait before each retry: from a refused attempt's end to the next
// attempt of the same method.
const waits: { asked: number; waitedMs: number }[] = [];
attempts.forEach((a, i) => {
  if (a.end === undefined) return;
  const next = attempts.slice(i + 1).find((b) => b.method === a.method);
  if (next) waits.push({ asked: a.wait ?? 0, waitedMs: next.start - a.end });
});
console.log(JSON.stringify({
  clientId: me.app?.clientId,
  made,
  seen,
  listCalls: attempts.filter((a) => a.method === "ListContacts" && a.code === undefined).length,
  refused: attempts.filter((a) => a.code !== undefined).map((a) => a.code),
  waits,
}));
`;

let compiledMore;
function compileMore() {
  compiledMore ??= (async () => {
    writeFileSync(join(app, "pages-and-retry.ts"), pagesAndRetry);
    writeFileSync(join(app, "tsconfig.more.json"), JSON.stringify({
      compilerOptions: { module: "nodenext", target: "es2022", types: ["node"], outDir: "out-more", skipLibCheck: false },
      files: ["pages-and-retry.ts"],
    }, null, 2));
    try {
      await run(join(app, "node_modules/.bin/tsc"), ["-p", "tsconfig.more.json", "--strict"], { cwd: app });
    } catch (err) {
      throw new Error(`tsc --strict failed:\n${err.stdout}${err.stderr}`);
    }
    return join(app, "out-more/pages-and-retry.js");
  })();
  return compiledMore;
}

for (const transport of ["connect", "grpc"]) {
  test(`in the fresh app, pages walks every page and a 429 is retried after its wait, over ${transport}`, async () => {
    const program = await compileMore();
    const client = srv.client(`Fresh Slow ${transport}`, "--read-rate", "1");
    const { stdout } = await run(process.execPath, [program], {
      cwd: app,
      env: { ...process.env, BASE_URL: srv.publicURL, CLIENT_ID: client.clientId, CLIENT_SECRET: client.clientSecret, TRANSPORT: transport },
    });
    const got = JSON.parse(stdout);
    assert.equal(got.clientId, client.clientId);
    assert.deepEqual([...got.seen].sort(), [...got.made].sort(), "every contact, once");
    assert.equal(got.listCalls, 3, "pages of 2, 2 and 1");
    // /me and three pages are four reads against a burst of 2: at least
    // one was refused, each refusal is ResourceExhausted (8), and each
    // retry came after the wait the server asked for.
    assert.ok(got.refused.length >= 1, `refused attempts: ${JSON.stringify(got)}`);
    assert.ok(got.refused.every((code) => code === 8), `refused with ResourceExhausted: ${got.refused}`);
    assert.equal(got.waits.length, got.refused.length, "every refused read was retried");
    for (const w of got.waits) {
      assert.ok(w.asked >= 1 && w.waitedMs >= w.asked * 1000 - 2, `waited ${w.waitedMs} ms, asked for ${w.asked} s`);
    }
  });
}

test("the README's install line names the tarball npm pack writes, and the peers", () => {
  const readme = readFileSync(join(pkgDir, "README.md"), "utf8");
  const install = readme.slice(readme.indexOf("\n## Install\n"));
  assert.ok(install.includes(`npm install ./${packed.filename}`), `the README installs ./${packed.filename}`);
  assert.ok(install.includes("npm install @bufbuild/protobuf @connectrpc/connect @connectrpc/connect-node"), "the README installs the peers");
});

// The README's "Events and webhook endpoints" example, as written: it is
// examples/events.ts (type-checked by `npm run build` against the pinned
// versions), compiles in the fresh app under `tsc --strict` against the
// newest peers, and runs: it reads the contact events of the client's
// workspace and creates an endpoint.
test("the README events example compiles with tsc --strict and runs", async () => {
  const readme = readFileSync(join(app, "node_modules/@svat/partnerapi-client/README.md"), "utf8");
  const m = readme.slice(readme.indexOf("\n## Events and webhook endpoints\n")).match(/```ts\n([\s\S]*?)```/);
  assert.ok(m, "the README has an events example");
  assert.equal(m[1], readFileSync(join(pkgDir, "examples/events.ts"), "utf8"), "examples/events.ts is the README's events example");
  writeFileSync(join(app, "events.ts"), m[1]);
  writeFileSync(join(app, "tsconfig.events.json"), JSON.stringify({
    compilerOptions: { module: "nodenext", target: "es2022", types: ["node"], outDir: "out-events", skipLibCheck: false },
    files: ["events.ts"],
  }, null, 2));
  try {
    await run(join(app, "node_modules/.bin/tsc"), ["-p", "tsconfig.events.json", "--strict"], { cwd: app });
  } catch (err) {
    throw new Error(`tsc --strict failed:\n${err.stdout}${err.stderr}`);
  }
  const client = srv.client("Fresh Events", "--scopes", "contacts:read contacts:write webhooks:read webhooks:write");
  // One contact, over REST, for the feed to hold.
  const basic = "Basic " + Buffer.from(`${client.clientId}:${client.clientSecret}`).toString("base64");
  const tok = await fetch(`${srv.publicURL}/api/oauth/token`, { method: "POST", headers: { Authorization: basic }, body: new URLSearchParams({ grant_type: "client_credentials" }) });
  assert.equal(tok.status, 200);
  const { access_token: token } = await tok.json();
  const created = await fetch(`${srv.publicURL}/api/v1/contacts`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ email: "fresh-events@example.com" }),
  });
  assert.equal(created.status, 201);
  const contact = await created.json();
  const { stdout } = await run(process.execPath, [join(app, "out-events/events.js")], {
    cwd: app,
    env: { ...process.env, BASE_URL: srv.publicURL, CLIENT_ID: client.clientId, CLIENT_SECRET: client.clientSecret, EVENTS_CURSOR: "" },
  });
  const lines = stdout.trim().split("\n");
  assert.equal(lines.length, 4, stdout);
  const [type, id, object] = lines[0].split(" ");
  assert.equal(type, "contact.created");
  assert.match(id, /^evt_/);
  assert.equal(JSON.parse(object).id, contact.id);
  assert.match(lines[1], /^cursor \S+$/, "the last event's cursor");
  assert.match(lines[2], /^endpoint whe_\S+ whsec_$/);
  assert.equal(lines[3], "endpoints 1");
});
