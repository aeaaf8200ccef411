// An MCP client written with the official TypeScript SDK, for skein's
// tests of `skein mcp`. Usage:
//
//   node client.mjs stdio TOOL ARGS_JSON -- COMMAND [ARGS...]
//   node client.mjs http TOOL ARGS_JSON URL TOKEN
//
// It connects, lists the tools, calls TOOL with ARGS_JSON and prints
// {tools, result} as JSON on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, tool, argsJSON, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  const argv = rest[0] === "--" ? rest.slice(1) : rest;
  transport = new StdioClientTransport({ command: argv[0], args: argv.slice(1), stderr: "inherit" });
} else {
  const [url, token] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}
const client = new Client({ name: "skein-test-client", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) });
console.log(JSON.stringify({ server: client.getServerVersion(), tools, result }));
await client.close();
