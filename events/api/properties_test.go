package api

import "testing"

// Property values are quantities: the scheduler compares and sorts them, and
// could not schedule a member reporting "lots" (found by FuzzDecide).
func TestValidatePropertyValues(t *testing.T) {
	m := &MemberCluster{}
	m.Name = "member-1"
	m.Status.Properties = map[PropertyName]PropertyValue{NodeCountProperty: {Value: "lots"}, TotalCPUProperty: {Value: "11500m"}}
	assertErrors(t, Validate(m), []string{`status.properties[kubernetes-fleet.io/node-count].value: "lots" is not a quantity such as 12, 500m or 4Gi`})
	m.Status.Properties[NodeCountProperty] = PropertyValue{Value: "3"}
	assertErrors(t, Validate(m), nil)
}
