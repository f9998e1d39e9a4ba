// The package as another app gets it: `npm pack`, then a fresh app in a
// temporary directory installs the tarball with the newest
// @bufbuild/protobuf, @connectrpc/connect, @connectrpc/connect-node,
// typescript and @types/node from npm, compiles the README's example
// with `tsc --strict`, and runs it against the real server over Connect
// and over gRPC (h2c). It needs the npm registry.
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
const newest = ["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-node", "typescript", "@types/node"];

// npm in the app must not see the settings `npm test` exports for this
// package (npm_config_local_prefix and the like).
const npmEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
const npm = (cwd, ...args) => run("npm", args, { cwd, env: npmEnv, maxBuffer: 16 << 20 });

let srv;
let tmp;
let app;
let packed;

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
    await npm(app, "install", "--no-audit", "--no-fund", join(tmp, packed.filename), ...newest.map((n) => `${n}@latest`));
  })();
  [srv] = await Promise.all([startServer(), installing]);
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
  for (const name of newest) {
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
