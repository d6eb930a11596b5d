package events

import (
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rules of the v2 payloads that travel in pieces: the piece's place, the
// bounds every piece keeps, and the clusters in name order.

func validatePart(p Part) []error {
	var errs []error
	if p.Revision < 1 {
		errs = append(errs, fmt.Errorf("revision: %d, must be at least 1", p.Revision))
	}
	if p.Pieces < 1 {
		errs = append(errs, fmt.Errorf("pieces: %d, must be at least 1", p.Pieces))
	} else if p.Piece < 0 || p.Piece >= p.Pieces {
		errs = append(errs, fmt.Errorf("piece: %d, must be in [0, %d)", p.Piece, p.Pieces))
	}
	return errs
}

// validateBase: the first revision of a state is its base.
func validateBase(p Part) error {
	if p.Revision == 1 && !p.Base {
		return errors.New("base: revision 1 must be a base")
	}
	return nil
}

func validateName(field, name string) error {
	if err := required(field, name); err != nil {
		return err
	}
	if len(name) > MaxNameBytes {
		return fmt.Errorf("%s: %d bytes, over %d", field, len(name), MaxNameBytes)
	}
	return nil
}

func validateText(field, s string) error {
	if len(s) > MaxMessageBytes {
		return fmt.Errorf("%s: %d bytes, over %d", field, len(s), MaxMessageBytes)
	}
	return nil
}

// validateClusters checks a piece's cluster names: at most MaxPieceClusters,
// each a name, strictly in name order (so no cluster twice).
func validateClusters(n int, name func(i int) string) []error {
	if n > MaxPieceClusters {
		return []error{fmt.Errorf("clusters: %d in one piece, over %d", n, MaxPieceClusters)}
	}
	var errs []error
	for i := range n {
		if err := validateName(fmt.Sprintf("clusters[%d].cluster", i), name(i)); err != nil {
			errs = append(errs, err)
		} else if i > 0 && name(i-1) >= name(i) {
			errs = append(errs, fmt.Errorf("clusters[%d].cluster: %q is not after %q: clusters are sorted by name, each once", i, name(i), name(i-1)))
		}
	}
	return errs
}

// validatePieceBytes checks the piece's JSON against MaxPieceBytes.
func validatePieceBytes(p any) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if len(b) > MaxPieceBytes {
		return fmt.Errorf("the piece is %d bytes of JSON, over %d", len(b), MaxPieceBytes)
	}
	return nil
}

func validatePlacementScheduledV2(p any) error {
	v := p.(*PlacementScheduledV2)
	errs := append(validatePart(v.Part()), validateBase(v.Part()), validateName("placement", v.Placement), validateText("message", v.Message))
	if v.ChosenCount < 0 || v.Wanted < 0 {
		errs = append(errs, fmt.Errorf("chosenCount and wanted must not be negative (%d, %d)", v.ChosenCount, v.Wanted))
	}
	errs = append(errs, validateClusters(len(v.Clusters), func(i int) string { return v.Clusters[i].Cluster })...)
	for i, c := range v.Clusters {
		switch c.Action {
		case "", ActionAdded, ActionKept, ActionRemoved, ActionLost, ActionReleased:
		default:
			errs = append(errs, fmt.Errorf("clusters[%d].action: %q is not added, kept, removed, lost, released or none", i, c.Action))
		}
		errs = append(errs, validateText(fmt.Sprintf("clusters[%d].reason", i), c.Reason),
			validateText(fmt.Sprintf("clusters[%d].failoverReason", i), c.FailoverReason),
			validateText(fmt.Sprintf("clusters[%d].failoverMessage", i), c.FailoverMessage))
	}
	errs = append(errs, validatePieceBytes(v))
	return errors.Join(errs...)
}

func validateRolloutProgressedV2(p any) error {
	v := p.(*RolloutProgressedV2)
	errs := append(validatePart(v.Part()), validateBase(v.Part()), validateName("placement", v.Placement),
		validateText("reason", v.Reason), validateText("message", v.Message))
	if v.ClusterCount < 0 {
		errs = append(errs, fmt.Errorf("clusterCount: %d, must not be negative", v.ClusterCount))
	}
	errs = append(errs, validateClusters(len(v.Clusters), func(i int) string { return v.Clusters[i].Cluster })...)
	for i, c := range v.Clusters {
		errs = append(errs, validateText(fmt.Sprintf("clusters[%d].reason", i), c.Reason),
			validateText(fmt.Sprintf("clusters[%d].message", i), c.Message))
		if v.Base && c.Removed {
			errs = append(errs, fmt.Errorf("clusters[%d].removed: a base lists only the clusters in the progress", i))
		}
		if o := c.Overrides; o != nil {
			errs = append(errs, validateText(fmt.Sprintf("clusters[%d].overrides.failed", i), o.Failed))
			if len(o.ClusterResourceOverrides) > MaxListedOverrides || len(o.ResourceOverrides) > MaxListedOverrides {
				errs = append(errs, fmt.Errorf("clusters[%d].overrides: more than %d overrides listed", i, MaxListedOverrides))
			}
		}
	}
	errs = append(errs, validatePieceBytes(v))
	return errors.Join(errs...)
}

func validatePlacementStatusChangedV2(p any) error {
	v := p.(*PlacementStatusChangedV2)
	errs := append(validatePart(v.Part()), validateName("placement", v.Placement))
	if v.SelectedResourceCount < 0 || v.ClusterCount < 0 {
		errs = append(errs, fmt.Errorf("selectedResourceCount and clusterCount must not be negative (%d, %d)", v.SelectedResourceCount, v.ClusterCount))
	}
	errs = append(errs, validateConditions("conditions", v.Conditions)...)
	errs = append(errs, validateClusters(len(v.Clusters), func(i int) string { return v.Clusters[i].Cluster })...)
	for i, c := range v.Clusters {
		errs = append(errs, validateConditions(fmt.Sprintf("clusters[%d].conditions", i), c.Conditions)...)
	}
	errs = append(errs, validatePieceBytes(v))
	return errors.Join(errs...)
}

func validateConditions(field string, conds []metav1.Condition) []error {
	if len(conds) > MaxConditions {
		return []error{fmt.Errorf("%s: %d conditions, over %d", field, len(conds), MaxConditions)}
	}
	var errs []error
	for i, c := range conds {
		errs = append(errs, required(fmt.Sprintf("%s[%d].type", field, i), c.Type),
			validateText(fmt.Sprintf("%s[%d].message", field, i), c.Message))
	}
	return errs
}
