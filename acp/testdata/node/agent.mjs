// A small ACP agent written with the official TypeScript SDK, for the
// tests of `skein serve --agent acp:...`: it speaks ACP on stdio and
// answers prompts by their first word.
//
//   node agent.mjs PIDDIR
//
// It writes its pid to PIDDIR/<pid> when it starts and says so on
// stderr. Prompts:
//   hello  streams "Hello", ", ", "world." and ends the turn;
//   tool   streams text, one tool call that completes and one that
//          fails, then more text;
//   slow   starts a tool call and waits for session/cancel (stop reason
//          cancelled);
//   ask    asks permission for a tool call and reports the outcome as
//          the call's (failed) result;
//   crash  writes to stderr and exits with status 3 mid-turn.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const pidDir = process.argv[2];
writeFileSync(join(pidDir, String(process.pid)), "");
process.stderr.write(`test agent ${process.pid} ready\n`);

let next = 0;
const cancels = new Map(); // sessionId -> resolve of the running prompt's wait

const app = acp
  .agent({ name: "test-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: `sess-${process.pid}-${++next}` }))
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    const resolve = cancels.get(params.sessionId);
    if (resolve) resolve();
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const sessionId = params.sessionId;
    const text = params.prompt.map((b) => b.text || "").join("");
    const update = (u) => client.notify(acp.methods.client.session.update, { sessionId, update: u });
    const say = (t) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t } });
    if (text.startsWith("hello")) {
      for (const t of ["Hello", ", ", "world."]) await say(t);
      return { stopReason: "end_turn" };
    }
    if (text.startsWith("tool")) {
      await say("Let me look.");
      await update({ sessionUpdate: "tool_call", toolCallId: "call-1", title: "Read notes", kind: "read", status: "pending", rawInput: { path: "notes.md" } });
      await update({ sessionUpdate: "tool_call", toolCallId: "call-2", title: "Run tests", kind: "execute", status: "pending", rawInput: { command: "make test" } });
      await update({ sessionUpdate: "tool_call_update", toolCallId: "call-1", status: "in_progress" });
      await update({ sessionUpdate: "tool_call_update", toolCallId: "call-1", status: "completed",
        content: [{ type: "content", content: { type: "text", text: "the notes say hi" } }] });
      await update({ sessionUpdate: "tool_call_update", toolCallId: "call-2", status: "failed",
        content: [{ type: "content", content: { type: "text", text: "make: no rule" } }] });
      await say("The notes say hi; ");
      await say("the tests did not run.");
      return { stopReason: "end_turn" };
    }
    if (text.startsWith("slow")) {
      await update({ sessionUpdate: "tool_call", toolCallId: "call-slow", title: "Wait", kind: "other", status: "in_progress", rawInput: {} });
      await new Promise((resolve) => cancels.set(sessionId, resolve));
      cancels.delete(sessionId);
      return { stopReason: "cancelled" };
    }
    if (text.startsWith("ask")) {
      await update({ sessionUpdate: "tool_call", toolCallId: "call-ask", title: "Delete the repo", kind: "delete", status: "pending", rawInput: {} });
      const r = await client.request(acp.methods.client.session.requestPermission, {
        sessionId,
        toolCall: { toolCallId: "call-ask", title: "Delete the repo" },
        options: [
          { optionId: "yes", name: "Allow", kind: "allow_once" },
          { optionId: "no", name: "Reject", kind: "reject_once" },
        ],
      });
      const outcome = r.outcome.outcome === "selected" ? r.outcome.optionId : r.outcome.outcome;
      await update({ sessionUpdate: "tool_call_update", toolCallId: "call-ask", status: "failed",
        content: [{ type: "content", content: { type: "text", text: `permission: ${outcome}` } }] });
      return { stopReason: "end_turn" };
    }
    if (text.startsWith("limit")) {
      await say("Too many requests");
      return { stopReason: "max_turn_requests" };
    }
    if (text.startsWith("crash")) {
      await say("About to fail");
      process.stderr.write("fatal: out of cheese\n");
      process.exit(3);
    }
    await say(`You said: ${text}`);
    return { stopReason: "end_turn" };
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const conn = app.connect(stream);
await conn.closed;
