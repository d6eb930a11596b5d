#!/usr/bin/env bash
# Makes what a Flotilla installation needs to keep its traffic and its Secrets private, with
# openssl (Debian: apt-get install openssl), in DIR:
#
#   ca.pem, ca-key.pem             the installation's certificate authority; keep ca-key.pem
#                                  private (it signs the certificates below)
#   nats.pem, nats-key.pem         the NATS servers' certificate: clients verify it, and the
#                                  servers present it to each other on their cluster routes
#   postgres.pem, postgres-key.pem PostgreSQL's certificate, for a server you run yourself
#                                  (clients connect with sslmode=verify-full)
#   flotilla.pem, flotilla-key.pem the control plane's client certificate (scheduler, rollout,
#                                  status, fleetctl)
#   apply-NAME.pem, apply-NAME-key.pem   the client certificate of member NAME's apply worker
#   encryption-keys                the rollout's key for Secrets at rest (--encryption-key-file)
#
# What exists is kept: run it again with more members to add their certificates. Keys are
# readable by their owner only, unless --readable (the compose stack's containers run as
# another user than yours and read them from a bind mount: use it on your own machine only).
#
# Usage:
#   tls.sh [--readable] DIR [MEMBER ...]
# Environment:
#   NATS_HOSTS      names and addresses in the NATS certificate (comma-separated); default
#                   nats, the Kubernetes Service and route names, localhost, 127.0.0.1, ::1
#   POSTGRES_HOSTS  the same for PostgreSQL; default postgres, localhost, 127.0.0.1, ::1
#   DAYS            validity of the certificates; default 825
set -euo pipefail

die() { echo "tls.sh: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

readable=false
if [ "${1:-}" = "--readable" ]; then
	readable=true
	shift
fi
(($# >= 1)) || usage
dir=$1
shift
command -v openssl >/dev/null || die "openssl is not installed (Debian/Ubuntu: apt-get install -y openssl)"

days=${DAYS:-825}
nats_hosts=${NATS_HOSTS:-nats,nats-headless,*.nats-headless,nats.flotilla.svc,nats.flotilla.svc.cluster.local,*.nats-headless.flotilla.svc,*.nats-headless.flotilla.svc.cluster.local,localhost,127.0.0.1,::1}
postgres_hosts=${POSTGRES_HOSTS:-postgres,localhost,127.0.0.1,::1}

mkdir -p "$dir"
umask 077

key_mode() { if $readable; then chmod 644 "$1"; else chmod 600 "$1"; fi; }

# san HOSTS: the subjectAltName of a comma-separated list of names and addresses.
san() {
	local h out=""
	IFS=, read -ra hs <<<"$1"
	for h in "${hs[@]}"; do
		if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then out+="IP:$h,"; else out+="DNS:$h,"; fi
	done
	printf '%s' "${out%,}"
}

ca() {
	[ -f "$dir/ca.pem" ] && return
	[ -f "$dir/ca-key.pem" ] && die "$dir/ca-key.pem exists without ca.pem: remove it or restore ca.pem"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
		-keyout "$dir/ca-key.pem" -out "$dir/ca.pem" -days "$((days + 365))" \
		-subj "/O=Flotilla/CN=Flotilla CA" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	chmod 600 "$dir/ca-key.pem"
	chmod 644 "$dir/ca.pem"
	echo "tls.sh: made the CA $dir/ca.pem" >&2
}

# leaf NAME CN USAGE [HOSTS]: a certificate signed by the CA, for serverAuth and/or clientAuth.
leaf() {
	local name=$1 cn=$2 usage=$3 hosts=${4:-} ext csr
	[ -f "$dir/$name.pem" ] && return
	ext=$(mktemp)
	csr=$(mktemp)
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature"
		echo "extendedKeyUsage=$usage"
		[ -n "$hosts" ] && echo "subjectAltName=$(san "$hosts")"
	} >"$ext"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
		-keyout "$dir/$name-key.pem" -out "$csr" -subj "/O=Flotilla/CN=$cn" 2>/dev/null
	openssl x509 -req -in "$csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" -sha256 \
		-set_serial "0x$(openssl rand -hex 16)" -days "$days" -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
	rm -f "$ext" "$csr"
	key_mode "$dir/$name-key.pem"
	chmod 644 "$dir/$name.pem"
	echo "tls.sh: made $dir/$name.pem ($cn)" >&2
}

encryption_keys() {
	local f=$dir/encryption-keys
	[ -f "$f" ] && return
	{
		echo "# The rollout's keys for Secrets at rest: <name>:<base64 of 32 bytes>, the first encrypting."
		echo "# To rotate: put a new key first, restart the rollout, and drop the old key after."
		echo "key-$(date -u +%Y%m%d):$(openssl rand -base64 32)"
	} >"$f"
	key_mode "$f"
	echo "tls.sh: made $f" >&2
}

# Member names as member.sh checks them: they name a certificate and a NATS user.
for m in "$@"; do
	[[ $m =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "member name '$m': lowercase letters, digits, '-' and '.' only"
done

ca
leaf nats nats serverAuth,clientAuth "$nats_hosts"
leaf postgres postgres serverAuth "$postgres_hosts"
leaf flotilla flotilla clientAuth
for m in "$@"; do
	leaf "apply-$m" "apply-$m" clientAuth
done
encryption_keys
