package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// The catalogue is the one place that says which event types exist, what each
// carries, and where each may travel. A subject is also a permission: NATS lets an
// apply worker publish on its own member's subjects only (deploy/kubernetes/member.sh),
// so an event is believed only when its type may travel on the subject it arrived on
// and its payload names what the subject names. Without that, a worker allowed on
// flotilla.workstatus.member-1.> could report work in member-2's name, and one allowed
// on flotilla.member.member-1.heartbeat could make member-2 leave the fleet.
//
// Every consumer checks this before its handler runs (Admit, or CheckSubject for the
// status service's audit log; bus.Consume refuses to run without a check), and what
// fails it is dead-lettered with a reason naming the type, the subject and the rule.

// entry is one catalogued type: its payload, the payload's rules, and its routes.
type entry struct {
	new      func() any
	validate func(any) error
	routes   []Route
}

// catalogue maps every event type to its payload, rules and routes.
var catalogue = map[string]entry{
	TypePlacementUpserted: {func() any { return new(PlacementUpserted) }, validatePlacementUpserted,
		routes(subjectPlacement, fieldOf("placement.metadata.name", func(p *PlacementUpserted) string { return p.Placement.Name }))},
	TypePlacementDeleted: {func() any { return new(PlacementDeleted) }, validatePlacementDeleted,
		routes(subjectPlacement, fieldOf("name", func(p *PlacementDeleted) string { return p.Name }))},

	// Membership is the operator's: only on flotilla.member.<member>, which no apply
	// worker may publish on. Heartbeats are the worker's, on a subject of their own.
	TypeMemberJoined: {func() any { return new(MemberJoined) }, validateMemberJoined,
		routes(subjectMember, fieldOf("member.metadata.name", func(p *MemberJoined) string { return p.Member.Name }))},
	TypeMemberUpdated: {func() any { return new(MemberUpdated) }, validateMemberUpdated,
		routes(subjectMember, fieldOf("member.metadata.name", func(p *MemberUpdated) string { return p.Member.Name }))},
	TypeMemberLeft: {func() any { return new(MemberLeft) }, validateMemberLeft,
		routes(subjectMember, fieldOf("name", func(p *MemberLeft) string { return p.Name }))},
	// Heartbeats travelled on flotilla.member.<member> before they had a subject of their
	// own; those still on the bus (or from a worker not yet upgraded) stay readable.
	TypeMemberHeartbeat: {func() any { return new(MemberHeartbeat) }, validateMemberHeartbeat,
		append(routes(subjectHeartbeat, fieldOf("name", func(p *MemberHeartbeat) string { return p.Name })),
			routes(subjectMember, fieldOf("name", func(p *MemberHeartbeat) string { return p.Name }))...)},

	TypeHubResourceUpserted: {func() any { return new(HubResourceUpserted) }, validateHubResourceUpserted,
		[]Route{{Pattern: subjectHub, Fields: hubFields, names: hubUpsertedNames}}},
	TypeHubResourceDeleted: {func() any { return new(HubResourceDeleted) }, validateHubResourceDeleted,
		[]Route{{Pattern: subjectHub, Fields: hubFields, names: func(p any) ([]string, bool) {
			r := p.(*HubResourceDeleted).Resource
			return hubNames(r.Group, r.Kind, r.Namespace, r.Name), true
		}}}},

	TypeOverrideUpserted: {func() any { return new(OverrideUpserted) }, validateOverrideUpserted,
		[]Route{{Pattern: subjectOverride, Fields: overrideFields, names: func(p any) ([]string, bool) {
			return overrideNames(p.(*OverrideUpserted).Key()), true
		}}}},
	TypeOverrideDeleted: {func() any { return new(OverrideDeleted) }, validateOverrideDeleted,
		[]Route{{Pattern: subjectOverride, Fields: overrideFields, names: func(p any) ([]string, bool) {
			return overrideNames(p.(*OverrideDeleted).Override), true
		}}}},

	TypeStagedUpdateUpserted: {func() any { return new(StagedUpdateUpserted) }, validateStagedUpdateUpserted,
		[]Route{{Pattern: subjectStagedUpdate, Fields: stagedUpdateFields, names: func(p any) ([]string, bool) {
			k := p.(*StagedUpdateUpserted).Key()
			return []string{k.Kind, k.Name}, true
		}}}},
	TypeStagedUpdateDeleted: {func() any { return new(StagedUpdateDeleted) }, validateStagedUpdateDeleted,
		[]Route{{Pattern: subjectStagedUpdate, Fields: stagedUpdateFields, names: func(p any) ([]string, bool) {
			k := p.(*StagedUpdateDeleted).Object
			return []string{k.Kind, k.Name}, true
		}}}},
	TypeApprovalRequestApproved: {func() any { return new(ApprovalRequestApproved) }, validateApprovalRequestApproved,
		routes(subjectApproval, fieldOf("name", func(p *ApprovalRequestApproved) string { return p.Name }))},

	// Evictions and budgets are the operator's, like placements.
	TypeDisruptionUpserted: {func() any { return new(DisruptionUpserted) }, validateDisruptionUpserted,
		[]Route{{Pattern: subjectDisruption, Fields: disruptionFields, names: func(p any) ([]string, bool) {
			k := p.(*DisruptionUpserted).Key()
			return []string{k.Kind, k.Name}, true
		}}}},
	TypeDisruptionDeleted: {func() any { return new(DisruptionDeleted) }, validateDisruptionDeleted,
		[]Route{{Pattern: subjectDisruption, Fields: disruptionFields, names: func(p any) ([]string, bool) {
			k := p.(*DisruptionDeleted).Object
			return []string{k.Kind, k.Name}, true
		}}}},

	TypePlacementScheduled: {func() any { return new(PlacementScheduled) }, validatePlacementScheduled,
		routes(subjectScheduling, fieldOf("placement", func(p *PlacementScheduled) string { return p.Placement }))},
	TypePlacementScheduledV2: {func() any { return new(PlacementScheduledV2) }, validatePlacementScheduledV2,
		routes(subjectScheduling, fieldOf("placement", func(p *PlacementScheduledV2) string { return p.Placement }))},

	TypeSnapshotCreated: {func() any { return new(SnapshotCreated) }, validateSnapshotCreated,
		routes(subjectRollout, fieldOf("placement", func(p *SnapshotCreated) string { return p.Placement }))},
	TypeRolloutProgressed: {func() any { return new(RolloutProgressed) }, validateRolloutProgressed,
		routes(subjectRollout, fieldOf("placement", func(p *RolloutProgressed) string { return p.Placement }))},
	TypeRolloutProgressedV2: {func() any { return new(RolloutProgressedV2) }, validateRolloutProgressedV2,
		routes(subjectRollout, fieldOf("placement", func(p *RolloutProgressedV2) string { return p.Placement }))},
	TypeWorkDesired: {func() any { return new(WorkDesired) }, validateWorkDesired,
		routes(subjectWork,
			fieldOf("cluster", func(p *WorkDesired) string { return p.Cluster }),
			fieldOf("placement", func(p *WorkDesired) string { return p.Placement }))},
	TypeWorkTombstoned: {func() any { return new(WorkTombstoned) }, validateWorkTombstoned,
		routes(subjectWork,
			fieldOf("cluster", func(p *WorkTombstoned) string { return p.Cluster }),
			fieldOf("placement", func(p *WorkTombstoned) string { return p.Placement }))},

	TypeWorkReported: {func() any { return new(WorkReported) }, validateWorkReported,
		routes(subjectWorkStatus,
			fieldOf("cluster", func(p *WorkReported) string { return p.Cluster }),
			fieldOf("placement", func(p *WorkReported) string { return p.Placement }))},
	// A worker's record of a tombstone it carried out, beside the tombstone on WORK.
	TypeWorkRemoved: {func() any { return new(WorkRemoved) }, validateWorkRemoved,
		routes(subjectWorkRemoved,
			fieldOf("cluster", func(p *WorkRemoved) string { return p.Cluster }),
			fieldOf("placement", func(p *WorkRemoved) string { return p.Placement }))},
	TypeTakeoversDecided: {func() any { return new(TakeoversDecided) }, validateTakeoversDecided,
		routes(subjectWorkStatus,
			fieldOf("cluster", func(p *TakeoversDecided) string { return p.Cluster }),
			fieldOf("placement", func(p *TakeoversDecided) string { return p.Placement }))},

	TypePlacementStatusChanged: {func() any { return new(PlacementStatusChanged) }, validatePlacementStatusChanged,
		routes(subjectStatus, fieldOf("placement.metadata.name", func(p *PlacementStatusChanged) string { return p.Placement.Name }))},
	TypePlacementStatusChangedV2: {func() any { return new(PlacementStatusChangedV2) }, validatePlacementStatusChangedV2,
		routes(subjectStatus, fieldOf("placement", func(p *PlacementStatusChangedV2) string { return p.Placement }))},

	// A notice about an event that names no placement travels on flotilla.outbox.-.
	TypeOutboxQuarantined: {func() any { return new(OutboxQuarantined) }, validateOutboxQuarantined,
		routes(subjectOutbox, fieldOf("placement", func(p *OutboxQuarantined) string { return orDash(p.Placement) }))},
}

// Subject patterns: literal tokens, and {named} tokens each bound to a payload field.
const (
	subjectPlacement = "flotilla.placement.{placement}"
	subjectMember    = "flotilla.member.{member}"
	subjectHeartbeat = "flotilla.member.{member}.heartbeat"
	subjectHub       = "flotilla.hub.{group}.{kind}.{namespace}.{name}"
	subjectOverride  = "flotilla.override.{kind}.{namespace}.{name}"
	// Strategies and runs; approvals travel on the approval request's subject.
	subjectStagedUpdate = "flotilla.stagedupdate.{kind}.{name}"
	subjectApproval     = "flotilla.stagedupdate.ClusterApprovalRequest.{name}"
	subjectDisruption   = "flotilla.disruption.{kind}.{name}"
	subjectScheduling   = "flotilla.scheduling.{placement}"
	subjectRollout      = "flotilla.rollout.{placement}"
	subjectWork         = "flotilla.work.{cluster}.{placement}"
	subjectWorkStatus   = "flotilla.workstatus.{cluster}.{placement}"
	subjectWorkRemoved  = "flotilla.work.{cluster}.{placement}.removed"
	subjectStatus       = "flotilla.status.{placement}"
	subjectOutbox       = "flotilla.outbox.{placement}"
)

// A Route is a subject pattern an event type may travel on, such as
// flotilla.work.{cluster}.{placement}, and the payload field each {named} token must
// spell (as bus.SubjectToken spells a name; '-' stands for an empty namespace or
// placement, "core" for the core API group).
type Route struct {
	Pattern string
	// Fields are the payload fields bound to the pattern's named tokens, in order.
	Fields []string
	// names reads the payload's values of Fields; false when the payload does not
	// carry them (a hub object stored as a blob), so only the pattern is checked.
	names func(payload any) ([]string, bool)
}

// Rule is the route as a sentence: flotilla.member.{member} with member = name.
func (r Route) Rule() string {
	toks := r.tokens()
	var binds []string
	for i, f := range r.Fields {
		if i < len(toks) {
			binds = append(binds, toks[i]+" = "+f)
		}
	}
	if len(binds) == 0 {
		return r.Pattern
	}
	return r.Pattern + " with " + strings.Join(binds, ", ")
}

// tokens are the names of the pattern's {named} tokens, in order.
func (r Route) tokens() []string {
	var out []string
	for _, t := range strings.Split(r.Pattern, ".") {
		if strings.HasPrefix(t, "{") {
			out = append(out, strings.Trim(t, "{}"))
		}
	}
	return out
}

// match returns the subject's tokens in the pattern's named places, or false when
// the subject does not have the pattern's shape.
func (r Route) match(subject string) ([]string, bool) {
	pat, sub := strings.Split(r.Pattern, "."), strings.Split(subject, ".")
	if len(pat) != len(sub) {
		return nil, false
	}
	var named []string
	for i, p := range pat {
		switch {
		case strings.HasPrefix(p, "{"):
			named = append(named, sub[i])
		case p != sub[i]:
			return nil, false
		}
	}
	return named, true
}

// bind checks that the payload spells the tokens the subject holds.
func (r Route) bind(typ, subject string, tokens []string, payload any) error {
	names, ok := r.names(payload)
	if !ok {
		return nil
	}
	for i, name := range names {
		want, err := bus.SubjectToken(name)
		if err != nil || want != tokens[i] {
			return &SubjectError{Type: typ, Subject: subject, Rule: r.Rule(),
				Detail: fmt.Sprintf("the payload's %s is %q, the subject names %q", r.Fields[i], name, tokens[i])}
		}
	}
	return nil
}

// routes is one route per pattern with the given bound fields.
func routes(pattern string, fields ...bound) []Route {
	r := Route{Pattern: pattern}
	for _, f := range fields {
		r.Fields = append(r.Fields, f.path)
	}
	r.names = func(p any) ([]string, bool) {
		out := make([]string, len(fields))
		for i, f := range fields {
			out[i] = f.value(p)
		}
		return out, true
	}
	return []Route{r}
}

// bound is a payload field bound to a subject token.
type bound struct {
	path  string
	value func(payload any) string
}

// fieldOf binds the payload field at path, read by get, to a subject token.
func fieldOf[T any](path string, get func(*T) string) bound {
	return bound{path: path, value: func(p any) string { return get(p.(*T)) }}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// hubFields are the fields a hub subject's tokens are bound to.
var hubFields = []string{"apiVersion's group", "kind", "metadata.namespace", "metadata.name"}

// hubNames are the names a hub subject spells for an object (see HubResourceSubject).
func hubNames(group, kind, namespace, name string) []string {
	if group == "" {
		group = "core"
	}
	return []string{group, kind, orDash(namespace), name}
}

// overrideFields are the fields an override subject's tokens are bound to.
var overrideFields = []string{"kind", "metadata.namespace", "metadata.name"}

// stagedUpdateFields are the fields a staged update subject's tokens are bound to.
var stagedUpdateFields = []string{"kind", "metadata.name"}

// disruptionFields are the fields a disruption subject's tokens are bound to.
var disruptionFields = []string{"kind", "metadata.name"}

// overrideNames are the names an override subject spells (see OverrideSubject).
func overrideNames(k api.OverrideKey) []string {
	return []string{k.Kind, orDash(k.Namespace), k.Name}
}

// hubUpsertedNames reads the object's identity from an inline manifest. One stored
// as a blob is checked by its reader once fetched (CheckHubManifest).
func hubUpsertedNames(p any) ([]string, bool) {
	v := p.(*HubResourceUpserted)
	if len(v.Manifest) == 0 {
		return nil, false
	}
	id, err := manifestIdentity(v.Manifest)
	if err != nil {
		// Not an object: nothing can match; the reader refuses it anyway.
		return []string{"", "", "", ""}, true
	}
	return id, true
}

// manifestIdentity reads the group, kind, namespace and name of a manifest.
func manifestIdentity(manifest []byte) ([]string, error) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, err
	}
	group, _, found := strings.Cut(m.APIVersion, "/")
	if !found {
		group = "" // "v1": the core group
	}
	return hubNames(group, m.Kind, m.Metadata.Namespace, m.Metadata.Name), nil
}

// ErrWrongSubject is the error of an event that arrived on a subject its type may
// not travel on, or whose payload names something else than the subject does.
var ErrWrongSubject = errors.New("event does not belong on its subject")

// SubjectError says which rule of the catalogue an event on a subject broke.
type SubjectError struct {
	Type    string
	Subject string
	// Rule is the route broken, or every route of the type when the subject fits none.
	Rule   string
	Detail string
}

func (e *SubjectError) Error() string {
	return fmt.Sprintf("%s on %s breaks the rule %s: %s", e.Type, e.Subject, e.Rule, e.Detail)
}

func (e *SubjectError) Unwrap() error { return ErrWrongSubject }

// Routes lists the routes of a catalogued type (nil for an unknown type).
func Routes(typ string) []Route {
	return slices.Clone(catalogue[typ].routes)
}

// Admit is the check every consumer makes before its handler runs: ev is a valid
// CloudEvent of a catalogued type, its payload decodes and passes its rules, its type
// may travel on subject (the subject it was stored under), and the payload names what
// the subject names. It is a bus.Validator.
func Admit(subject string, ev cloudevents.Event) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("invalid cloudevent: %w", err)
	}
	p, err := Decode(ev)
	if err != nil {
		return err
	}
	return checkRoutes(ev.Type(), subject, p)
}

// CheckSubject is Admit for a consumer that keeps events it cannot read: the status
// service records every event in the audit log, including types this build does not
// know. An event of a catalogued type must travel on one of its type's subjects and,
// when its payload decodes, name what the subject names; anything else passes, and is
// only recorded (its payload is not folded). It is a bus.Validator.
func CheckSubject(subject string, ev cloudevents.Event) error {
	if _, ok := catalogue[ev.Type()]; !ok {
		return nil
	}
	p, err := Decode(ev)
	if err != nil {
		p = nil
	}
	return checkRoutes(ev.Type(), subject, p)
}

// CheckHubManifest checks a hub object fetched from a blob against the subject its
// HubResourceUpserted event arrived on: the object must be the one the subject names.
func CheckHubManifest(subject string, manifest []byte) error {
	r := catalogue[TypeHubResourceUpserted].routes[0]
	toks, ok := r.match(subject)
	if !ok {
		return &SubjectError{Type: TypeHubResourceUpserted, Subject: subject, Rule: r.Rule(), Detail: "not a hub subject"}
	}
	id, err := manifestIdentity(manifest)
	if err != nil {
		id = []string{"", "", "", ""}
	}
	hub := Route{Pattern: r.Pattern, Fields: r.Fields, names: func(any) ([]string, bool) { return id, true }}
	return hub.bind(TypeHubResourceUpserted, subject, toks, nil)
}

// checkRoutes checks the subject against typ's routes, and the payload's names
// against the route it fits (only the route when payload is nil).
func checkRoutes(typ, subject string, payload any) error {
	e, ok := catalogue[typ]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownType, typ)
	}
	for _, r := range e.routes {
		toks, ok := r.match(subject)
		if !ok {
			continue
		}
		if payload == nil {
			return nil
		}
		return r.bind(typ, subject, toks, payload)
	}
	rules := make([]string, len(e.routes))
	for i, r := range e.routes {
		rules[i] = r.Rule()
	}
	return &SubjectError{Type: typ, Subject: subject, Rule: strings.Join(rules, " or "),
		Detail: "the type does not travel on this subject"}
}

// SubjectOf is the subject an event of typ with payload travels on: its type's first
// route, filled in with the payload's names. It fails for a hub object stored as a
// blob, whose names the payload does not carry.
func SubjectOf(typ string, payload any) (string, error) {
	e, ok := catalogue[typ]
	if !ok {
		return "", fmt.Errorf("subject of %q: %w", typ, ErrUnknownType)
	}
	p := e.new()
	data, err := json.Marshal(payload)
	if err == nil {
		err = json.Unmarshal(data, p)
	}
	if err != nil {
		return "", fmt.Errorf("subject of %s: %w", typ, err)
	}
	r := e.routes[0]
	names, ok := r.names(p)
	if !ok {
		return "", fmt.Errorf("subject of %s: the payload does not name its object", typ)
	}
	toks := strings.Split(r.Pattern, ".")
	n := 0
	for i, t := range toks {
		if !strings.HasPrefix(t, "{") {
			continue
		}
		tok, err := bus.SubjectToken(names[n])
		if err != nil {
			return "", fmt.Errorf("subject of %s: %s: %w", typ, r.Fields[n], err)
		}
		toks[i] = tok
		n++
	}
	return strings.Join(toks, "."), nil
}

// A Request is a request-reply subject beside the events: who may ask on it, who
// answers, and where the answer goes. Nothing on these subjects is stored or changes
// state; they are catalogued so that members' permissions (deploy/kubernetes/member.sh)
// and the permission matrix (e2e/deploy) cover them too.
type Request struct {
	Subject string
	// Senders are who may publish the request: "hub" is the hub services' and fleetctl's
	// user; no member may ask.
	Senders []string
	// Answerer is who subscribes: a hub service, or "apply-{cluster}", the named
	// member's worker alone.
	Answerer string
	// Reply is where the answer goes: the requester's inbox, or for a member's answer
	// its own preview inbox, the only place it may publish one.
	Reply string
}

// requests lists every request-reply subject.
var requests = []Request{
	{Subject: QuerySubjectPrefix + "*", Senders: []string{"hub"}, Answerer: "status", Reply: "the requester's inbox"},
	{Subject: PreviewSchedulingSubject, Senders: []string{"hub"}, Answerer: "scheduler", Reply: "the requester's inbox"},
	{Subject: PreviewRolloutSubject, Senders: []string{"hub"}, Answerer: "rollout", Reply: "the requester's inbox"},
	{Subject: previewMemberPrefix + "{cluster}", Senders: []string{"hub"}, Answerer: ApplyAnswerer,
		Reply: bus.InboxRoot + "." + bus.ApplyUserPrefix + "{cluster}." + previewReplyToken + ".{token}"},
}

// ApplyAnswerer is the Answerer of a request only the named member's worker answers.
const ApplyAnswerer = "apply-{cluster}"

// Requests lists the request-reply subjects.
func Requests() []Request { return slices.Clone(requests) }
