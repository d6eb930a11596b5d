package standalone

import (
	"strings"
	"testing"
)

func TestRedactURLHidesEveryPassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://flotilla:hunter2@db:5432/flotilla?sslmode=verify-full",
		"postgres://flotilla@db/flotilla?password=hunter2&sslmode=require",
		"host=db user=flotilla password=hunter2 sslmode=verify-full",
		"host=db user=flotilla password='hun ter2' dbname=flotilla",
		"host=db PASSWORD = hunter2",
	} {
		got := redactURL(raw)
		if strings.Contains(got, "hunter2") || strings.Contains(got, "ter2") || !strings.Contains(got, "db") {
			t.Errorf("redactURL(%q) = %q", raw, got)
		}
	}
	if got := redactURL("postgres://postgres@127.0.0.1:5432/flotilla?sslmode=disable"); got != "postgres://postgres@127.0.0.1:5432/flotilla?sslmode=disable" {
		t.Errorf("a URL without a password changed: %q", got)
	}
}
