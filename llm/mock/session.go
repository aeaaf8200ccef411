package mock

import "context"

// A session queue is a Mock of its own for one session of a server that
// runs many (skein serve): what a prompt's handler queues with llm_mock
// answers that session's calls only, and what a cancelled turn left
// queued waits for the session's next prompt instead of answering
// another session. A call its queue cannot answer falls through to the
// shared Mock it was made from (the fixtures of --llm-replay, what the
// agent file queued when it was loaded).

// NewSessionQueue returns an empty queue whose unanswered calls fall
// through to m, and which logs its requests in m's log too.
func (m *Mock) NewSessionQueue() *Mock { return &Mock{parent: m} }

type queueKey struct{}

// WithQueue returns ctx carrying q: the mock's providers called with it
// (and llm_mock, llm_mock_calls and llm_mock_clear on a thread whose
// context it is) use q instead of the shared Mock.
func WithQueue(ctx context.Context, q *Mock) context.Context {
	return context.WithValue(ctx, queueKey{}, q)
}

// QueueOf returns the session queue ctx carries, else m.
func (m *Mock) QueueOf(ctx context.Context) *Mock {
	if q, ok := ctx.Value(queueKey{}).(*Mock); ok && q != nil {
		return q
	}
	return m
}
