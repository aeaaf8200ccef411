// An ACP client written with the official TypeScript SDK, for the tests
// of `skein acp`: it starts the agent command given after "--", drives
// it through a session and prints what it saw as one JSON object.
//
//   node client.mjs CWD LOAD_ID -- skein acp --store DB agent.star
//
// The session: initialize; session/new in CWD; a prompt whose tool call
// completes; one whose tool call fails; one cancelled mid-tool with
// session/cancel; one more after the cancel; then session/load of
// LOAD_ID, a session written earlier by skein run.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const sep = process.argv.indexOf("--");
const [cwd, loadId] = process.argv.slice(2, sep);
const [cmd, ...args] = process.argv.slice(sep + 1);

const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

// Updates of sessions that no ActiveSession routes (session/load).
const loaded = [];
const app = acp
  .client({ name: "skein-acp-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    if (params.sessionId === loadId) loaded.push(params.update);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options[0].optionId },
  }));

// turn sends one prompt and collects its updates until the stop; when
// cancelOn(update) is true it sends session/cancel.
async function turn(ctx, session, text, cancelOn) {
  const updates = [];
  const done = session.prompt(text);
  for (;;) {
    const m = await session.nextUpdate();
    if (m.kind === "stop") {
      await done;
      return { updates, stopReason: m.stopReason };
    }
    updates.push(m.update);
    if (cancelOn && cancelOn(m.update)) {
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId: session.sessionId });
      cancelOn = null;
    }
  }
}

const out = {};
try {
  await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    out.initialize = init;
    const session = await ctx.buildSession(cwd).start();
    out.sessionId = session.sessionId;
    out.add = await turn(ctx, session, "add 2 and 3");
    out.broken = await turn(ctx, session, "break something");
    out.cancelled = await turn(ctx, session, "wait for it", (u) =>
      u.sessionUpdate === "tool_call_update" && u.status === "in_progress" ||
      u.sessionUpdate === "tool_call" && u.status === "in_progress");
    out.after = await turn(ctx, session, "hello again");
    session.dispose();
    try {
      await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: "no-such-session",
        prompt: [{ type: "text", text: "hi" }],
      });
      out.unknownSession = { ok: true };
    } catch (e) {
      out.unknownSession = { code: e.code, message: e.message };
    }
    out.load = await ctx.request(acp.methods.agent.session.load, { sessionId: loadId, cwd, mcpServers: [] });
    out.loaded = loaded;
  });
} catch (e) {
  out.error = String(e && e.stack || e);
}
child.stdin.end();
await new Promise((resolve) => child.on("exit", (code) => { out.exitCode = code; resolve(); }));
process.stdout.write(JSON.stringify(out) + "\n");
