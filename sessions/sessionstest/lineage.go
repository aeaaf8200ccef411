package sessionstest

import (
	"github.com/skein-dev/skein/sessions"
)

// testParentCycle: Create refuses a record whose ParentID would close a
// cycle through the stored parents (an import of A with parent B, then
// of B with parent A), and a session that is its own parent, with
// sessions.ErrCycle naming the session; nothing is stored.
func testParentCycle(h *harness) {
	a := newRecord("cyc-a", at(0))
	a.ParentID = "cyc-b" // not stored: a fork whose parent is gone
	h.create(a)

	b := newRecord("cyc-b", at(1))
	b.ParentID = "cyc-a"
	h.wantErr("Create of a parent cycle", h.b.Create(h.ctx(), cloneRecord(b)), sessions.ErrCycle, "cyc-b")
	if ok, err := h.b.Exists(h.ctx(), "cyc-b"); err != nil || ok {
		h.t.Fatalf("Exists after a refused Create = %v, %v; want false", ok, err)
	}

	self := newRecord("cyc-self", at(2))
	self.ParentID = "cyc-self"
	h.wantErr("Create of its own child", h.b.Create(h.ctx(), cloneRecord(self)), sessions.ErrCycle, "cyc-self")

	// A longer chain: c -> a -> (b, missing); d with parent c is fine, and
	// b with parent d would close the cycle.
	c := newRecord("cyc-c", at(3))
	c.ParentID = "cyc-a"
	h.create(c)
	d := newRecord("cyc-d", at(4))
	d.ParentID = "cyc-c"
	h.create(d)
	b.ParentID = "cyc-d"
	h.wantErr("Create closing a longer cycle", h.b.Create(h.ctx(), cloneRecord(b)), sessions.ErrCycle, "cyc-b")
	h.check(d)
	if ok, err := h.b.Exists(h.ctx(), "cyc-b"); err != nil || ok {
		h.t.Fatalf("Exists after a refused Create = %v, %v; want false", ok, err)
	}
}
