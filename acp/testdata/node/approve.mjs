// An ACP client written with the official TypeScript SDK, for the test
// of `skein acp AGENT.agent.yaml` with a tool the agent must have
// approved: it starts the agent command given after "--", opens a
// session in CWD and sends one prompt per answer given, answering each
// session/request_permission with the next answer (an option id, or
// "cancel"). It prints what it saw as one JSON object.
//
//   node approve.mjs CWD ANSWER... -- skein acp ... helper.agent.yaml
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const sep = process.argv.indexOf("--");
const [cwd, ...answers] = process.argv.slice(2, sep);
const [cmd, ...args] = process.argv.slice(sep + 1);

const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const asked = [];
let answer = "cancel";
const app = acp.client({ name: "skein-acp-approve-test" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    asked.push({ toolCall: params.toolCall, options: params.options.map((o) => o.optionId + ":" + o.kind) });
    if (answer === "cancel") return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: answer } };
  });

const out = { turns: [] };
try {
  await app.connectWith(stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const session = await ctx.buildSession(cwd).start();
    out.sessionId = session.sessionId;
    for (const a of answers) {
      answer = a;
      const updates = [];
      const done = session.prompt(`run it (${a})`);
      for (;;) {
        const m = await session.nextUpdate();
        if (m.kind === "stop") {
          await done;
          out.turns.push({ updates, stopReason: m.stopReason });
          break;
        }
        updates.push(m.update);
      }
    }
    session.dispose();
  });
} catch (e) {
  out.error = String(e && e.stack || e);
}
out.asked = asked;
child.stdin.end();
await new Promise((resolve) => child.on("exit", (code) => { out.exitCode = code; resolve(); }));
process.stdout.write(JSON.stringify(out) + "\n");
