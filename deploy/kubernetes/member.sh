#!/usr/bin/env bash
# Adds member clusters to a Flotilla kustomize overlay. Kustomize cannot loop over a list, so
# each member gets a folder of its own, and the files that list every member are rewritten
# from those folders:
#
#   OVERLAY/members/NAME/        apply worker Deployment + kubeconfig Secret (from the templates
#                                in deploy/kubernetes/member/)
#   OVERLAY/members/kustomization.yaml   one entry per member folder
#   OVERLAY/accounts.conf        NATS users: the control plane, and per member a user
#                                apply-NAME allowed on NAME's subjects only
#   OVERLAY/secrets/nats-users.env       a random password per member (kept once made)
#   OVERLAY/secrets/tls/, members/NAME/  NATS client certificates (deploy/tls.sh)
#
# Usage:
#   member.sh add OVERLAY NAME [KUBECONFIG]   add or update member NAME (a placeholder
#                                             kubeconfig when none is given and none exists)
#   member.sh sync OVERLAY                    rewrite the lists, e.g. after `rm -r
#                                             OVERLAY/members/NAME` to remove a member
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
templates=$here/member

die() { echo "member.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# A member name is a Kubernetes object name (DNS-1123 subdomain); it also names a Deployment,
# a Secret, a label value (63 characters at most) and, with '.' as '_', a NATS subject token.
check_name() {
	[[ $1 =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "member name '$1': lowercase letters, digits, '-' and '.' only, starting and ending with a letter or digit"
	((${#1} <= 57)) || die "member name '$1': 57 characters at most (apply-NAME must fit a label value)"
}

# token NAME: the NATS subject token of a member name (events/bus.SubjectToken).
token() { printf '%s' "${1//./_}"; }

# password_key NAME: the Secret key (and NATS variable) holding apply-NAME's password.
password_key() {
	local n
	n=$(printf '%s' "$1" | tr 'a-z.-' 'A-Z__')
	printf 'APPLY_%s_PASSWORD' "$n"
}

render() { # render TEMPLATE NAME > FILE
	sed -e "s|@MEMBER@|$2|g" -e "s|@TOKEN@|$(token "$2")|g" -e "s|@PASSWORD_KEY@|$(password_key "$2")|g" "$1"
}

new_password() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

members() { # the member folders of OVERLAY, sorted
	local d
	for d in "$1"/members/*/; do
		[ -f "$d/kustomization.yaml" ] && basename "$d"
	done | LC_ALL=C sort
}

# nats_user NAME: apply-NAME's entry in accounts.conf. What a worker does on the bus, and the
# subjects it needs (T: the name as a subject token; events/subjects.go, events/bus/topology.go):
#   publish results and heartbeats         flotilla.workstatus.T.>, flotilla.member.T.heartbeat
#                                          (flotilla.member.T itself, where the operator's
#                                          join, update and leave travel, is not the worker's)
#   dead-letter what it cannot apply       flotilla.deadletter.apply-T
#   record a tombstone it carried out      flotilla.work.T.*.removed (on WORK, beside the desired
#                                          state, which stays the rollout's alone to write)
#   create/read its durable consumer       $JS.API.CONSUMER.CREATE|INFO.WORK.apply-T
#   pull and acknowledge its work          $JS.API.CONSUMER.MSG.NEXT.WORK.apply-T, $JS.ACK.WORK.apply-T.>
#   replay the desired state at start      consumer replay-T: CREATE (filter flotilla.work.T.> in
#                                          the subject), INFO, MSG.NEXT, DELETE
#   fetch its large work (claim checks)    $JS.API.DIRECT.GET.WORKBLOBS.flotilla.blob.work.T.>
#   receive replies (pulls, publish acks)  _INBOX.apply-T.>, its own inbox prefix
#                                          (events/bus.MemberInboxPrefix), never _INBOX.>
#   answer placement previews              subscribe flotilla.preview.member.T (events/preview.go),
#                                          answer on _INBOX.apply-T.preview.* only (its own inbox:
#                                          the requester listens there; no other reply subject)
# It may not publish work (only rollout does), touch streams, or name another member. What it
# publishes on its subjects must also name NAME: every consumer checks an event's payload
# against its subject (events/catalogue.go) and dead-letters what names another member.
#
# A consumer created through $JS.API.CONSUMER.CREATE.<stream>.<name>.<filter> must have that
# filter (the server checks), so only that form pins a worker to its own work. The unfiltered
# form for apply-T remains while events/bus creates the durable with FilterSubjects (which
# nats.go sends unfiltered); it lets a worker give its own consumer another filter.
nats_user() {
	local name=$1 t key
	t=$(token "$name")
	key=$(password_key "$name")
	cat <<EOF
      # Apply worker of member $name.
      {
        user: "apply-$name"
        password: \$$key
        permissions: {
          publish: {
            allow: [
              "flotilla.workstatus.$t.>"
              "flotilla.member.$t.heartbeat"
              "flotilla.deadletter.apply-$t"
              "flotilla.work.$t.*.removed"
              "\$JS.API.CONSUMER.CREATE.WORK.apply-$t.flotilla.work.$t.>"
              "\$JS.API.CONSUMER.INFO.WORK.apply-$t"
              "\$JS.API.CONSUMER.MSG.NEXT.WORK.apply-$t"
              "\$JS.ACK.WORK.apply-$t.>"
              "\$JS.API.CONSUMER.CREATE.WORK.replay-$t.flotilla.work.$t.>"
              "\$JS.API.CONSUMER.INFO.WORK.replay-$t"
              "\$JS.API.CONSUMER.MSG.NEXT.WORK.replay-$t"
              "\$JS.API.CONSUMER.DELETE.WORK.replay-$t"
              "\$JS.API.DIRECT.GET.WORKBLOBS.flotilla.blob.work.$t.>"
              "_INBOX.apply-$t.preview.*"
            ]
          }
          subscribe: {
            allow: [
              "flotilla.work.$t.>"
              "flotilla.workstatus.$t.>"
              "flotilla.member.$t.heartbeat"
              "_INBOX.apply-$t.>"
              "flotilla.preview.member.$t"
            ]
          }
        }
      }
EOF
}

sync_overlay() {
	local overlay=$1 names=() name key env seen=""
	mapfile -t names < <(members "$overlay")
	for name in "${names[@]}"; do
		key=$(password_key "$name")
		case " $seen " in *" $key "*) die "members map to the same password key $key: rename one" ;; esac
		seen="$seen $key"
	done

	{
		echo "# Written by deploy/kubernetes/member.sh from the folders beside this file."
		echo "apiVersion: kustomize.config.k8s.io/v1beta1"
		echo "kind: Kustomization"
		if ((${#names[@]} == 0)); then
			echo "resources: []"
		else
			echo "resources:"
			printf '  - %s\n' "${names[@]}"
		fi
	} >"$overlay/members/kustomization.yaml"

	{
		cat <<'EOF'
# NATS accounts and users, written by deploy/kubernetes/member.sh from members/ (edit the
# script, not this file). Passwords are $VARIABLES from the Secret flotilla-nats-users, which
# the NATS pods import as environment variables.
accounts {
  FLOTILLA {
    jetstream: enabled
    users: [
      # scheduler, rollout, status (and fleetctl): the whole account.
      { user: flotilla, password: $FLOTILLA_PASSWORD }
EOF
		for name in "${names[@]}"; do nats_user "$name"; done
		cat <<'EOF'
    ]
  }
  SYS {
    users: [
      { user: sys, password: $SYS_PASSWORD }
    ]
  }
}
system_account: SYS
EOF
	} >"$overlay/accounts.conf"

	# Passwords: keep what exists, add what is missing, drop those of removed members.
	env=$overlay/secrets/nats-users.env
	mkdir -p "$overlay/secrets"
	touch "$env"
	local tmp
	tmp=$(mktemp)
	for key in FLOTILLA_PASSWORD SYS_PASSWORD; do
		grep -m1 "^$key=" "$env" || echo "$key=$(new_password)"
	done >"$tmp"
	for name in "${names[@]}"; do
		key=$(password_key "$name")
		grep -m1 "^$key=" "$env" || echo "$key=$(new_password)"
	done >>"$tmp"
	mv "$tmp" "$env"
	chmod 600 "$env"
}

add_member() {
	local overlay=$1 name=$2 kubeconfig=${3:-} dir
	check_name "$name"
	dir=$overlay/members/$name
	mkdir -p "$dir"
	render "$templates/kustomization.yaml.tmpl" "$name" >"$dir/kustomization.yaml"
	render "$templates/apply-worker.yaml.tmpl" "$name" >"$dir/apply-worker.yaml"
	if [ -n "$kubeconfig" ]; then
		[ -f "$kubeconfig" ] || die "no kubeconfig at $kubeconfig"
		cp "$kubeconfig" "$dir/kubeconfig"
		chmod 600 "$dir/kubeconfig"
	elif [ ! -f "$dir/kubeconfig" ]; then
		render "$templates/kubeconfig.tmpl" "$name" >"$dir/kubeconfig"
		echo "member.sh: $dir/kubeconfig is a placeholder: replace it with $name's kubeconfig" >&2
	fi
	# Its NATS client certificate, from the overlay's CA (made there first if need be).
	bash "$here/tls.sh" "$overlay/secrets/tls" "$name"
	cp "$overlay/secrets/tls/"{ca.pem,"apply-$name.pem","apply-$name-key.pem"} "$dir/"
	sync_overlay "$overlay"
	echo "member.sh: member $name in $overlay (apply-$name); deploy with: kubectl apply -k $overlay" >&2
}

case "${1:-}" in
add)
	(($# == 3 || $# == 4)) || usage
	[ -f "$2/kustomization.yaml" ] || die "$2 is not a kustomize overlay"
	mkdir -p "$2/members"
	add_member "$2" "$3" "${4:-}"
	;;
sync)
	(($# == 2)) || usage
	[ -f "$2/kustomization.yaml" ] || die "$2 is not a kustomize overlay"
	mkdir -p "$2/members"
	sync_overlay "$2"
	;;
*) usage ;;
esac
