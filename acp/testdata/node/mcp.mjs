// An ACP client written with the official TypeScript SDK, for the test of
// the client's MCP servers under `skein acp`: it starts the agent command
// given after "--" and prints what it saw as one JSON object.
//
//   node mcp.mjs CWD SERVERS.json -- skein acp --allow-cmd node ... agent
//
// SERVERS.json is {"good": [McpServer...], "bad": {LABEL: [McpServer...]}}.
// The session: initialize; session/new in CWD with the good servers; a
// prompt (the agent's turn calls a tool of those servers); then one
// session/new per bad list, each expected to be refused.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const sep = process.argv.indexOf("--");
const [cwd, serversFile] = process.argv.slice(2, sep);
const [cmd, ...args] = process.argv.slice(sep + 1);
const servers = JSON.parse(readFileSync(serversFile, "utf8"));

const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const app = acp.client({ name: "skein-acp-mcp-test" });

const out = { refused: {} };
try {
  await app.connectWith(stream, async (ctx) => {
    out.initialize = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    const session = await ctx.buildSession({ cwd, mcpServers: servers.good }).start();
    out.sessionId = session.sessionId;
    const updates = [];
    const done = session.prompt("echo it");
    for (;;) {
      const m = await session.nextUpdate();
      if (m.kind === "stop") {
        await done;
        out.turn = { updates, stopReason: m.stopReason };
        break;
      }
      updates.push(m.update);
    }
    session.dispose();
    for (const [label, list] of Object.entries(servers.bad)) {
      try {
        const r = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: list });
        out.refused[label] = { ok: true, sessionId: r.sessionId };
      } catch (e) {
        out.refused[label] = { code: e.code, message: e.message };
      }
    }
  });
} catch (e) {
  out.error = String(e && e.stack || e);
}
child.stdin.end();
out.exitCode = await new Promise((resolve) => {
  if (child.exitCode !== null) resolve(child.exitCode);
  else child.on("exit", (code) => resolve(code));
});
process.stdout.write(JSON.stringify(out) + "\n");
