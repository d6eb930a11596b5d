package cli

import (
	"strings"
	"testing"
)

// TestArgumentErrors checks that wrong commands fail before connecting,
// saying what is wrong and where help is.
func TestArgumentErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"rollout"}, `unknown command "rollout" for "fleetctl"`},
		{"unknown flag", []string{"get", "crp", "--bogus"}, "unknown flag: --bogus\nSee 'fleetctl get --help' for usage"},
		{"apply without files", []string{"apply"}, "must specify at least one file with -f"},
		{"apply with arguments", []string{"apply", "x.yaml"}, `unknown command "x.yaml" for "fleetctl apply"`},
		{"apply of a missing file", []string{"apply", "-f", "testdata/nope.yaml"}, "read testdata/nope.yaml: no such file or directory"},
		{"apply stdin twice", []string{"apply", "-f", "-", "-f", "-"}, "standard input (-) can be given only once"},
		{"apply bad dry run", []string{"apply", "-f", "x", "--dry-run=all"}, `--dry-run must be none, client or server, not "all"`},
		{"server dry run without placements", []string{"apply", "-f", "testdata/seeds/members.yaml", "--dry-run=server"},
			"--dry-run=server previews placements: the files hold no ClusterResourcePlacement"},
		{"apply server dry run bad output", []string{"apply", "-f", "x", "--dry-run=server", "-o", "wide"}, `-o must be table, yaml or json for --dry-run=server, not "wide"`},
		{"get without type", []string{"get"}, "you must specify the type of resource: clusterresourceplacements (crp), resourceplacements (rp), memberclusters (members), clusterresourceoverrides (cro), resourceoverrides (ro), clusterstagedupdatestrategies (csus), clusterstagedupdateruns (csur), clusterapprovalrequests (careq), stagedupdatestrategies (sus), stagedupdateruns (sur), approvalrequests (areq), clusterresourceplacementevictions (crpe) or clusterresourceplacementdisruptionbudgets (crpdb)"},
		{"get unknown type", []string{"get", "pods"}, `the resource type "pods" is not known to fleetctl; use clusterresourceplacements (crp), resourceplacements (rp), memberclusters (members), clusterresourceoverrides (cro), resourceoverrides (ro), clusterstagedupdatestrategies (csus), clusterstagedupdateruns (csur), clusterapprovalrequests (careq), stagedupdatestrategies (sus), stagedupdateruns (sur), approvalrequests (areq), clusterresourceplacementevictions (crpe) or clusterresourceplacementdisruptionbudgets (crpdb)`},
		{"get unknown output", []string{"get", "crp", "-o", "xml"}, `unknown output format "xml"; use one of table, wide, yaml, json, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, jsonpath-file=FILE`},
		{"get empty jsonpath", []string{"get", "crp", "-o", "jsonpath="}, "output format jsonpath needs a template"},
		{"get bad jsonpath", []string{"get", "crp", "-o", "jsonpath={.status"}, "error parsing jsonpath {.status, unclosed action"},
		{"get names and selector", []string{"get", "crp", "a", "-l", "app=web"}, "give either names or a label selector (-l), not both"},
		{"get mixed slash forms", []string{"get", "crp", "crp/a"}, "there is no need to specify a resource type as a separate argument"},
		{"get bad slash form", []string{"get", "crp/"}, `arguments in resource/name form must have a single resource and name, not "crp/"`},
		{"describe unknown type", []string{"describe", "deployments", "x"}, `the resource type "deployments" is not known to fleetctl`},
		{"delete without names", []string{"delete", "crp"}, "name the clusterresourceplacement.placement.kubernetes-fleet.io to delete"},
		{"delete files and names", []string{"delete", "-f", "x.yaml", "crp", "a"}, "give either -f or a resource type and names, not both"},
		{"delete bad leave policy", []string{"delete", "member", "m", "--leave-policy", "Drain"}, `--leave-policy must be Keep or Delete, not "Drain"`},
		{"history of a member", []string{"history", "member", "m"}, "history is kept for placements only"},
		{"history of two", []string{"history", "crp", "a", "b"}, "name exactly one placement"},
		{"history as jsonpath", []string{"history", "crp", "a", "-o", "jsonpath={.x}"}, `output format "jsonpath={.x}" is not available here; use table, wide, yaml or json`},
		{"takeovers with arguments", []string{"takeovers", "web"}, `unknown command "web" for "fleetctl takeovers"`},
		{"takeovers negative limit", []string{"takeovers", "--limit", "-1"}, "--limit must be 0 (no limit) or more, not -1"},
		{"deadletters with arguments", []string{"deadletters", "7"}, `unknown command "7" for "fleetctl deadletters"`},
		{"deadletters negative limit", []string{"deadletters", "--limit", "-1"}, "--limit must be 0 (no limit) or more, not -1"},
		{"deadletters bad output", []string{"deadletters", "-o", "jsonpath={.x"}, "error parsing jsonpath {.x"},
		{"deadletter show without id", []string{"deadletters", "show"}, "accepts 1 arg(s), received 0"},
		{"deadletter show bad id", []string{"deadletters", "show", "seven"}, `"seven" is not a dead-letter ID`},
		{"redrive nothing", []string{"deadletters", "redrive"}, "name the dead letters to redrive by ID, or give --all"},
		{"redrive ids and all", []string{"deadletters", "redrive", "7", "--all"}, "name the dead letters to redrive by ID, or give --all"},
		{"redrive consumer without all", []string{"deadletters", "redrive", "7", "--consumer", "rollout"}, "--consumer goes with --all"},
		{"redrive id zero", []string{"deadletters", "redrive", "0"}, `"0" is not a dead-letter ID`},
		{"wait without for", []string{"wait", "crp", "a"}, "--for is required, e.g. --for=condition=Applied"},
		{"wait bad for", []string{"wait", "crp", "a", "--for=ready"}, `--for must be delete or condition=NAME[=VALUE] (e.g. condition=Applied), not "ready"`},
		{"wait unknown condition", []string{"wait", "crp", "a", "--for=condition=Ready"}, `unknown condition "Ready" in --for; use one of Scheduled, RolloutStarted, Overridden, WorkSynchronized, Applied, Available, DiffReported, Synchronized`},
		{"wait bad value", []string{"wait", "crp", "a", "--for=condition=Applied=yes"}, "the condition value in --for must be True, False or Unknown"},
		{"wait on members", []string{"wait", "members", "m", "--for=condition=Applied"}, "wait works on placements"},
		{"wait without names", []string{"wait", "crp", "--for=condition=Applied"}, "name the placement(s) to wait for"},
		{"wait rp without names", []string{"wait", "rp", "-n", "team-a", "--for=condition=ResourcePlacementApplied"}, "name the placement(s) to wait for"},
		{"delete rp without names", []string{"delete", "resourceplacements", "-n", "team-a"}, "name the resourceplacement.placement.kubernetes-fleet.io to delete"},
		{"get rp with names and all namespaces", []string{"get", "rp", "a", "-A"}, "a name cannot be given with --all-namespaces"},
		{"wait zero timeout", []string{"wait", "crp", "a", "--for=condition=Applied", "--timeout=0s"}, "--timeout must be positive, not 0s"},
		{"bad duration", []string{"wait", "crp", "a", "--for=condition=Applied", "--timeout=soon"}, `invalid argument "soon" for "--timeout" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fleetctl(t, "", append(tc.args, "--nats", unreachable)...)
			if r.e == nil {
				t.Fatalf("fleetctl %s succeeded, want an error containing %q", strings.Join(tc.args, " "), tc.want)
			}
			if !strings.Contains(r.e.Error(), tc.want) {
				t.Errorf("error = %q, want one containing %q", r.e, tc.want)
			}
			if strings.Contains(r.e.Error(), "cannot reach NATS") {
				t.Errorf("fleetctl tried to connect before checking its arguments")
			}
		})
	}
}

func TestUnreachableNATSSaysWhatToDo(t *testing.T) {
	for _, args := range [][]string{
		{"apply", "-f", "testdata/seeds/web-2-crp-never.yaml"},
		{"get", "crp"},
		{"delete", "crp", "web-2-crp"},
		{"wait", "crp", "web-2-crp", "--for=condition=Applied"},
	} {
		r := fleetctl(t, "", append(args, "--nats", unreachable)...)
		want := "cannot reach NATS at " + unreachable
		if r.e == nil || !strings.Contains(r.e.Error(), want) ||
			!strings.Contains(r.e.Error(), "start Flotilla with `make run` (or the standalone binary), or point fleetctl at your NATS server with --nats URL or FLOTILLA_NATS_URL") {
			t.Errorf("fleetctl %s: error = %v, want %q with what to do", strings.Join(args, " "), r.e, want)
		}
	}
}

func TestNATSURLFromEnvironment(t *testing.T) {
	var errOut strings.Builder
	err := Run(t.Context(), []string{"get", "crp"}, Options{
		Out: &strings.Builder{}, Err: &errOut,
		Getenv: func(k string) string {
			if k == EnvNATSURL {
				return "nats://127.0.0.1:2"
			}
			return ""
		},
	})
	if err == nil || !strings.Contains(err.Error(), "cannot reach NATS at nats://127.0.0.1:2") {
		t.Errorf("error = %v, want the URL from %s", err, EnvNATSURL)
	}
}

func TestHelpListsCommands(t *testing.T) {
	r := fleetctl(t, "", "--help")
	if r.e != nil {
		t.Fatal(r.e)
	}
	for _, c := range []string{"apply", "get", "describe", "delete", "history", "takeovers", "wait"} {
		if !strings.Contains(r.out, "  "+c+" ") {
			t.Errorf("help does not list %s:\n%s", c, r.out)
		}
	}
}
