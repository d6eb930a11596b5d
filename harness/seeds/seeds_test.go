package seeds_test

import (
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/harness/seeds"
)

func TestRead(t *testing.T) {
	if got := seeds.Read(t, "001-1.yaml"); !strings.HasPrefix(got, "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: crp-1\n") {
		t.Errorf("seed 001's first block:\n%s", got)
	}
}
