package framework

import (
	"maps"
	"slices"
)

// A MemberSet keeps, next to its members, their labels and properties by
// column: one slice per label key and per property, indexed by member index.
// Plugins bind selectors to these columns once per decision, so evaluating a
// member is slice indexing instead of hashing label keys.

// LabelColumn holds one label key across a member set. Values are interned:
// each distinct value has an id, and each member row holds the id of its value,
// or -1 when the member lacks the label.
type LabelColumn struct {
	values []string
	ids    map[string]int32
	rows   []int32
}

// Values lists the distinct values, by id.
func (c *LabelColumn) Values() []string { return c.values }

// ID returns the value id of the member at index i, or -1 if it lacks the label.
func (c *LabelColumn) ID(i int) int32 { return c.rows[i] }

// intern returns the id of value, adding it if new.
func (c *LabelColumn) intern(value string) int32 {
	id, ok := c.ids[value]
	if !ok {
		id = int32(len(c.values))
		c.values = append(c.values, value)
		c.ids[value] = id
	}
	return id
}

// PropertyColumn holds one property across a member set, as float64 for
// interpolation.
type PropertyColumn struct {
	floats []float64
	has    []bool
}

// Float returns the value of the member at index i, if it reports the property.
func (c *PropertyColumn) Float(i int) (float64, bool) { return c.floats[i], c.has[i] }

// columns is the columnar view of a member set.
type columns struct {
	labels     map[string]*LabelColumn
	properties map[string]*PropertyColumn
}

func buildColumns(members []*Member) columns {
	c := columns{labels: map[string]*LabelColumn{}, properties: map[string]*PropertyColumn{}}
	for i, m := range members {
		c.setRow(i, m, len(members))
	}
	return c
}

// setRow writes member m into row i of columns sized n, creating columns as
// needed. Columns must already be private to the caller.
func (c *columns) setRow(i int, m *Member, n int) {
	for k, v := range m.Labels {
		col, ok := c.labels[k]
		if !ok {
			col = &LabelColumn{ids: map[string]int32{}, rows: make([]int32, n)}
			for j := range col.rows {
				col.rows[j] = -1
			}
			c.labels[k] = col
		}
		col.rows[i] = col.intern(v)
	}
	for name, p := range m.properties {
		col, ok := c.properties[name]
		if !ok {
			col = &PropertyColumn{floats: make([]float64, n), has: make([]bool, n)}
			c.properties[name] = col
		}
		col.floats[i], col.has[i] = p.Float, true
	}
}

// replaceRow returns columns in which row i holds m instead of old: a member
// that changed but kept its place. Columns that do not change are shared with
// c, so a heartbeat that only moves properties copies only property columns.
func (c columns) replaceRow(i int, old, m *Member, n int) columns {
	out := c
	if !maps.Equal(old.Labels, m.Labels) {
		out.labels = make(map[string]*LabelColumn, len(c.labels))
		for k, col := range c.labels {
			if _, now := m.Labels[k]; now || col.rows[i] >= 0 {
				col = &LabelColumn{values: slices.Clone(col.values), ids: maps.Clone(col.ids), rows: slices.Clone(col.rows)}
				col.rows[i] = -1
			}
			out.labels[k] = col
		}
		only := *m
		only.properties = nil
		(&columns{labels: out.labels, properties: nil}).setRow(i, &only, n)
	}
	if !sameProperties(old, m) {
		out.properties = make(map[string]*PropertyColumn, len(c.properties))
		for name, col := range c.properties {
			if _, now := m.properties[name]; now || col.has[i] {
				col = &PropertyColumn{floats: slices.Clone(col.floats), has: slices.Clone(col.has)}
				col.has[i] = false
			}
			out.properties[name] = col
		}
		only := *m
		only.Labels = nil
		(&columns{labels: nil, properties: out.properties}).setRow(i, &only, n)
	}
	return out
}

func sameProperties(a, b *Member) bool {
	if len(a.properties) != len(b.properties) {
		return false
	}
	for name, p := range a.properties {
		q, ok := b.properties[name]
		if !ok || p.Float != q.Float || p.Quantity.Cmp(q.Quantity) != 0 {
			return false
		}
	}
	return true
}
