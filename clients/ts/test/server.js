// startServer runs `partnerapi serve` (the binary from PARTNERAPI_BIN,
// default ../../bin/partnerapi, on an embedded PostgreSQL or
// TEST_DATABASE_URL) on ports of its choosing, and returns its URLs, a
// runner of its management CLI, a runner of SQL on its database (psql),
// and stop(). Not a test file: the test files share it.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

export const bin = resolve(process.env.PARTNERAPI_BIN ?? "../../bin/partnerapi");

// extraEnv is more of serve's environment (PARTNER_WEBHOOK_ALLOWED_NETWORKS
// for a receiver on this machine).
export async function startServer(extraEnv = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "partnerapi-ts-"));
  chmodSync(dataDir, 0o755);
  const env = {
    ...process.env,
    PARTNER_HTTP_ADDR: "127.0.0.1:0",
    PARTNER_ADMIN_ADDR: "127.0.0.1:0",
    PARTNER_DATA_DIR: dataDir,
    PARTNER_ADMIN_TOKEN: "",
    DATABASE_URL: process.env.TEST_DATABASE_URL ?? "",
    // The key that seals webhook secrets: needed with TEST_DATABASE_URL (the
    // embedded database makes its own in PARTNER_DATA_DIR).
    PARTNER_SECRET_KEY: "dGVzdCBrZXkgb2YgdGhlIHBhcnRuZXJhcGkgdGVzdHM=",
    ...extraEnv,
  };
  const server = spawn(bin, ["serve"], { env, stdio: ["ignore", "ignore", "pipe"] });
  const lines = createInterface({ input: server.stderr });
  const log = [];
  let socket = "";
  const serving = new Promise((resolveServing, reject) => {
    const timer = setTimeout(() => reject(new Error("serve did not start within 60s:\n" + log.join("\n"))), 60_000);
    server.on("exit", (code) => reject(new Error(`serve exited with ${code}:\n${log.join("\n")}`)));
    lines.on("line", (line) => {
      log.push(line);
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.msg === "embedded postgresql ready") socket = entry.socket;
      if (entry.msg === "serving") {
        clearTimeout(timer);
        resolveServing(entry);
      }
    });
  });
  const entry = await serving;
  const publicURL = `http://${entry.public}`;
  const adminURL = `http://${entry.admin}`;
  const cli = (...args) =>
    JSON.parse(execFileSync(bin, args, { env: { ...process.env, PARTNER_ADMIN_URL: adminURL, PARTNER_ADMIN_TOKEN: "" } }).toString());
  // client makes a workspace, a member and an API client with every
  // scope; extra are more `client create` flags (--read-rate 1).
  // A --scopes in extra replaces the default ones.
  const client = (workspaceName, ...extra) => {
    const ws = cli("workspace", "create", "--name", workspaceName);
    const member = cli("member", "add", "--workspace", ws.id, "--email", `${ws.id}@example.com`, "--settings-access");
    const scopes = extra.includes("--scopes") ? [] : ["--scopes", "contacts:read contacts:write leads:read leads:write"];
    return cli("client", "create", "--workspace", ws.id, "--member", member.id, "--name", `${workspaceName} client`,
      ...scopes, ...extra);
  };
  // databaseURL is the server's database: TEST_DATABASE_URL, or the
  // embedded PostgreSQL's unix socket, as the server's own role.
  const databaseURL =
    process.env.TEST_DATABASE_URL || `postgresql://partnerapi@/partnerapi?host=${encodeURIComponent(socket)}&port=5432`;
  // sql runs statements on the server's database with psql and returns
  // the rows of the last one, a line each, columns separated by "|" (for
  // what no API does yet, such as defining custom fields in a test).
  const sql = (statements) =>
    execFileSync("psql", [databaseURL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statements], {
      env: { ...process.env, PGCONNECT_TIMEOUT: "10" },
    })
      .toString()
      .trim();
  // defineField defines a custom field of the workspace named
  // workspaceName with SQL (the definitions API, POST
  // /api/v1/custom-fields, is not what these tests are about): options
  // are option values, labelled in upper case. The server reads a
  // workspace's definitions again within a second.
  const defineField = (workspaceName, object, key, type, { required = false, options, label = key } = {}) => {
    const quote = (v) => `'${String(v).replaceAll("'", "''")}'`;
    const opts = options ? quote(JSON.stringify(options.map((value) => ({ value, label: value.toUpperCase() })))) : "NULL";
    sql(
      `INSERT INTO custom_fields (workspace_id, id, object, key, label, type, options, required)
       SELECT id, gen_random_uuid(), ${quote(object)}, ${quote(key)}, ${quote(label)}, ${quote(type)}, ${opts}::jsonb, ${required}
       FROM workspaces WHERE name = ${quote(workspaceName)}`,
    );
  };
  const stop = async () => {
    if (server.exitCode === null) {
      const exited = new Promise((r) => server.once("exit", r));
      server.kill("SIGTERM");
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  return { publicURL, adminURL, databaseURL, cli, client, sql, defineField, stop };
}
