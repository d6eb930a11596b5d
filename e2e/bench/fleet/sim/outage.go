package sim

import (
	"fmt"
	"strconv"
)

// Outage is how a simulated member is down.
type Outage int32

const (
	// Up: the member beats and works.
	Up Outage = iota
	// Silent: the member's worker is gone; no heartbeat, no work done.
	Silent
	// Unreachable: the worker beats, each heartbeat saying the member's API server cannot
	// be read (as the real worker's does), and cannot apply anything.
	Unreachable
)

func (o Outage) String() string {
	switch o {
	case Silent:
		return "silent"
	case Unreachable:
		return "unreachable"
	}
	return "up"
}

// unreachableMessage is the real worker's heartbeat message when its API server cannot be
// read (services/apply/worker heartbeat), with the error a stopped API server gives.
const unreachableMessage = "the member's API server cannot be read: Get \"https://127.0.0.1:6443/api/v1/nodes\": dial tcp 127.0.0.1:6443: connect: connection refused"

// Down takes the named members down as how says (Silent or Unreachable) until Recover: the
// work they are sent meanwhile waits, as it waits in their consumers or in a worker that
// cannot reach its API server, and is done when they recover.
func (f *Fleet) Down(names []string, how Outage) error {
	if how != Silent && how != Unreachable {
		return fmt.Errorf("simulated outage %s: want silent or unreachable", how)
	}
	for _, name := range names {
		m := f.byName[name]
		if m == nil {
			return fmt.Errorf("simulated outage: no member %q", name)
		}
		m.outage.Store(int32(how))
	}
	return nil
}

// Recover brings the named members back: each sends a healthy heartbeat at once (a worker
// that starts again, or finds its API server again, says so without waiting a period) and
// does the work that waited.
func (f *Fleet) Recover(names []string) error {
	for _, name := range names {
		m := f.byName[name]
		if m == nil {
			return fmt.Errorf("simulated recovery: no member %q", name)
		}
		m.outage.Store(int32(Up))
		go func() {
			ctx := f.ctx
			if !f.slot(ctx) {
				return
			}
			m.heartbeat(ctx)
			f.release()
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range m.placements {
				if p.held {
					p.held = false
					m.kick(p, actApply, m.f.opts.ApplyDelay.Sample(m.draw("apply", p.name, strconv.FormatUint(p.desired.seq, 10), "recovered")))
				}
			}
		}()
	}
	return nil
}

// Holds reports whether member name holds objects of the placement (its last apply left
// them and no tombstone has removed them since).
func (f *Fleet) Holds(name, placement string) bool {
	m := f.byName[name]
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.placements[placement]
	return p != nil && p.holds
}

// down is the member's outage now.
func (m *member) down() Outage { return Outage(m.outage.Load()) }
