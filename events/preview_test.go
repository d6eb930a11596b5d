package events_test

import (
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
)

func TestPreviewSubjectsAreTheMembersOwn(t *testing.T) {
	subject, err := events.PreviewMemberSubject("member.1")
	if err != nil || subject != "flotilla.preview.member.member_1" {
		t.Errorf("PreviewMemberSubject(member.1) = %q, %v", subject, err)
	}
	prefix, err := events.PreviewReplyPrefix("member.1")
	if err != nil || prefix != "_INBOX.apply-member_1.preview" {
		t.Errorf("PreviewReplyPrefix(member.1) = %q, %v", prefix, err)
	}
	for reply, ok := range map[string]bool{
		"_INBOX.apply-member_1.preview.abc":     true,
		"_INBOX.apply-member_1.preview":         false,
		"_INBOX.apply-member_1.preview.a.b":     false,
		"_INBOX.apply-member_1.preview.*":       false,
		"_INBOX.apply-member_2.preview.abc":     false,
		"_INBOX.fleetctl.abc":                   false,
		"_INBOX.apply-member_1.previewabc.x":    false,
		"flotilla.workstatus.member_1.web":      false,
		"_INBOX.apply-member_1.preview.>":       false,
		"_INBOX.apply-member_1.preview.abc def": false,
	} {
		if err := events.CheckPreviewReply("member.1", reply); (err == nil) != ok {
			t.Errorf("CheckPreviewReply(member.1, %q) = %v, want allowed %v", reply, err, ok)
		}
	}
}

func TestDecodeMemberPreviewRequest(t *testing.T) {
	good := `{"cluster":"m1","placement":"web","manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}],"applyStrategy":{}}`
	if r, err := events.DecodeMemberPreviewRequest("m1", []byte(good)); err != nil || len(r.Manifests) != 1 {
		t.Fatalf("a good request: %+v, %v", r, err)
	}
	for name, tc := range map[string]struct{ data, want string }{
		"another member's":                 {good, `cluster: the request is for "m1", this worker is "m2"`},
		"no placement":                     {`{"cluster":"m2","manifests":[]}`, "placement:"},
		"a manifest that is not an object": {`{"cluster":"m2","placement":"web","manifests":[[1]]}`, "manifests[0]: not a JSON object"},
		"not JSON":                         {`{`, "preview request:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := events.DecodeMemberPreviewRequest("m2", []byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func FuzzDecodeMemberPreviewRequest(f *testing.F) {
	f.Add([]byte(`{"cluster":"m1","placement":"web","manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}],"applyStrategy":{"type":"ServerSideApply"}}`))
	f.Add([]byte(`{"cluster":"m1","placement":"a.b","manifests":[{}, null, "x"]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := events.DecodeMemberPreviewRequest("m1", data)
		if err != nil {
			return
		}
		if r.Cluster != "m1" || len(r.Manifests) > events.PreviewMaxManifests {
			t.Errorf("accepted %+v", r)
		}
		for i, m := range r.Manifests {
			if len(m) == 0 || m[0] != '{' {
				t.Errorf("accepted manifest %d: %q", i, m)
			}
		}
	})
}
