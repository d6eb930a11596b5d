// Package stage is the arithmetic of staged update runs: which clusters each
// stage of a strategy holds, in which order, and how many a stage updates at
// a time.
package stage

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Cluster is a scheduled cluster and its labels.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Assign puts each cluster in the stage whose selector matches it: a nil
// selector matches none, an empty one all. A stage's clusters are ordered by
// its sortingLabelKey read as an integer (clusters without the label, or
// with a value that is not an integer, after those with one), then by name.
// A cluster two stages select is an error, as upstream's; so is one no stage
// selects, since the run could never update it.
func Assign(stages []api.StageConfig, clusters []Cluster) ([][]string, error) {
	out := make([][]string, len(stages))
	owner := map[string]int{}
	for i, st := range stages {
		if st.LabelSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(st.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("stage %s: label selector: %w", st.Name, err)
		}
		var picked []Cluster
		for _, c := range clusters {
			if !sel.Matches(labels.Set(c.Labels)) {
				continue
			}
			if j, taken := owner[c.Name]; taken {
				return nil, fmt.Errorf("cluster %s is selected by both stage %s and stage %s; a cluster may be in one stage only",
					c.Name, stages[j].Name, st.Name)
			}
			owner[c.Name] = i
			picked = append(picked, c)
		}
		key := ""
		if st.SortingLabelKey != nil {
			key = *st.SortingLabelKey
		}
		slices.SortFunc(picked, func(a, b Cluster) int {
			av, aok := order(a.Labels, key)
			bv, bok := order(b.Labels, key)
			switch {
			case aok && bok && av != bv:
				return cmp.Compare(av, bv)
			case aok != bok:
				if aok {
					return -1
				}
				return 1
			}
			return strings.Compare(a.Name, b.Name)
		})
		for _, c := range picked {
			out[i] = append(out[i], c.Name)
		}
	}
	var missing []string
	for _, c := range clusters {
		if _, ok := owner[c.Name]; !ok {
			missing = append(missing, c.Name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("no stage selects the scheduled cluster(s) %s; every scheduled cluster must be in exactly one stage", strings.Join(missing, ", "))
	}
	return out, nil
}

func order(l map[string]string, key string) (int64, bool) {
	if key == "" {
		return 0, false
	}
	v, ok := l[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// Concurrency is how many of a stage's n clusters update at a time: the
// number given, or the percentage of n rounded down; at least 1.
func Concurrency(mc *intstr.IntOrString, n int) int {
	if mc == nil {
		return 1
	}
	v, err := intstr.GetScaledValueFromIntOrPercent(mc, n, false)
	if err != nil || v < 1 {
		return 1
	}
	return v
}
