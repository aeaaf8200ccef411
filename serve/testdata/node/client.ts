// A program against the client types openapi-typescript generates from
// skein serve's /openapi.json (api.d.ts, beside this file when the test
// runs). tsc --strict must accept it: open objects (metadata, usage, tool
// call arguments) take any keys, and every status the server answers is
// declared.
import type { components, paths } from "./api";

type Session = components["schemas"]["Session"];
type Message = components["schemas"]["Message"];
type ApiError = components["schemas"]["Error"];

const session: Session = {
  id: "s1", agent: "assistant", repoId: null, title: "t",
  metadata: { agent: "assistant", user: "ann", tags: ["a"] },
  status: "active", running: false, messageCount: 2, turns: 1, parentId: null,
  createdAt: "2026-11-27T00:00:00Z", updatedAt: "2026-11-27T00:00:00Z",
};
const user: unknown = session.metadata["user"];

const reply: Message = {
  id: "m1", seq: 2, role: "assistant", content: "hi", createdAt: "2026-11-27T00:00:00Z",
  toolCalls: [{ id: "c1", name: "tools.read_file", arguments: { path: "a.go", limit: 10 } }],
  usage: { input_tokens: 12, output_tokens: 3 },
  metadata: { reason: "x" },
};

// Statuses: DELETE may be busy (503); create may be refused (429); the
// prompt may be queued (202 with queued and position); errors share a
// shape, including the undeclared ones (default: 405, 500).
type Delete = paths["/api/sessions/{id}"]["delete"]["responses"];
const busy: Delete[503]["content"]["application/json"] = { error: { code: "busy", message: "m" } };
type Create = paths["/api/sessions"]["post"]["responses"];
const full: Create[429]["content"]["application/json"] = { error: { code: "too_many_sessions", message: "m" } };
type Prompt = paths["/api/sessions/{id}/prompt"]["post"];
const accepted: Prompt["responses"][202]["content"]["application/json"] = { sessionId: "s1", queued: true, position: 1 };
const body: Prompt["requestBody"] extends { content: { "application/json": infer B } } | undefined ? B : never = { text: "hello" };
type Complete = paths["/api/sessions/{id}/complete"]["post"]["responses"];
const completed: Complete[200]["content"]["application/json"] = session;
const other: Delete["default"]["content"]["application/json"] = { error: { code: "method_not_allowed", message: "m" } };
const e: ApiError = other;

// Repositories: registered with {id, path}; a session bound to one shows
// it (repo) in GET /api/sessions/{id}; a path outside the workspace root
// is a 400.
type Repo = components["schemas"]["Repo"];
const repo: Repo = { id: "api", path: "/srv/work/api", createdAt: "2026-11-27T00:00:00Z" };
type CreateRepo = paths["/api/repos"]["post"];
const register: CreateRepo["requestBody"] extends { content: { "application/json": infer B } } | undefined ? B : never = { id: "api", path: "api" };
const registered: CreateRepo["responses"][201]["content"]["application/json"] = repo;
const outside: CreateRepo["responses"][400]["content"]["application/json"] = { error: { code: "path_outside_root", message: "m" } };
const repos: paths["/api/repos"]["get"]["responses"][200]["content"]["application/json"] = { repos: [repo], workspaceRoot: "/srv/work" };
const bound: paths["/api/sessions/{id}"]["get"]["responses"][200]["content"]["application/json"] = { ...session, repoId: "api", repo, messages: [reply] };
type RepoDelete = paths["/api/repos/{id}"]["delete"]["responses"];
const inUse: RepoDelete[409]["content"]["application/json"] = { error: { code: "repo_in_use", message: "m" } };

export const all = [user, reply, busy, full, accepted, body, completed, e, register, registered, outside, repos, bound, inUse];
