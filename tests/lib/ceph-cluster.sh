#!/bin/sh
# tests/lib/ceph-cluster.sh: a throwaway one-node Ceph cluster for the RBD
# tests, from Debian's packages (ceph-mon, ceph-osd, ceph-common), no
# containers: one ceph-mon and one ceph-osd with the memstore object
# store (everything in memory), cephx on, on 127.0.0.1 only, pool size 1,
# no mgr.  Everything lives in DIR; nothing outside it is touched.
#
#   ceph-cluster.sh start DIR [MEMSTORE_BYTES]   start it; prints the
#                                                variables to eval
#   ceph-cluster.sh stop DIR                     stop it and remove DIR
#
# start prints CEPH_CONF=DIR/ceph.conf and CEPH_KEYRING=DIR/keyring
# (client.admin); the pool "rbd" exists.  Exits 77 (skip) when the
# packages are missing, 1 on any other failure (the daemons' logs are in
# DIR/log).
set -u

die() {
	echo "ceph-cluster: $*" >&2
	[ -n "${dir:-}" ] && [ -d "$dir/log" ] && tail -n 20 "$dir"/log/*.log >&2 2>/dev/null
	exit "${rc:-1}"
}

# A free TCP port on 127.0.0.1 from the range above the ephemeral ones we
# would collide with; several clusters (other tests, other users) may run.
free_port() {
	python3 - "$1" <<'EOP'
import random, socket, sys
rnd = random.Random(int(sys.argv[1]))
for _ in range(200):
    p = rnd.randrange(20000, 30000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
EOP
}

stop() {
	dir=$1
	for pidf in "$dir"/run/*.pid; do
		[ -f "$pidf" ] || continue
		pid=$(cat "$pidf")
		kill "$pid" 2>/dev/null
	done
	for pidf in "$dir"/run/*.pid; do
		[ -f "$pidf" ] || continue
		pid=$(cat "$pidf")
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -9 "$pid" 2>/dev/null
	done
	case "$dir" in
	*/ceph.*) rm -rf "$dir" ;;
	esac
}

start() {
	dir=$1
	bytes=${2:-1073741824}
	for t in ceph-mon ceph-osd ceph-authtool monmaptool ceph rbd uuidgen python3; do
		command -v "$t" >/dev/null 2>&1 || { rc=77 die "$t not installed (scripts/install-deps.sh installs Ceph)"; }
	done
	mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" || die "cannot make $dir"
	fsid=$(uuidgen)
	port=$(free_port $$) || die "no free port"
	[ -n "$port" ] || die "no free port"
	cat >"$dir/ceph.conf" <<EOC
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$port
mon initial members = a
public addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.\$pid.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
ms bind msgr2 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
paxos propose interval = 0.01
mon data = $dir/mon/\$cluster-\$id
[osd]
osd data = $dir/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = $bytes
osd max object name len = 256
osd max object namespace len = 64
EOC
	kr=$dir/keyring
	ceph-authtool --create-keyring "$kr" --gen-key -n mon. --cap mon 'allow *' >/dev/null ||
		die "ceph-authtool (mon.) failed"
	ceph-authtool "$kr" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
		--cap mgr 'allow *' >/dev/null || die "ceph-authtool (client.admin) failed"
	monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$port]" "$dir/monmap" \
		>/dev/null || die "monmaptool failed"
	ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$kr" \
		2>>"$dir/log/mkfs.log" || die "ceph-mon --mkfs failed"
	ceph-mon -c "$dir/ceph.conf" -i a 2>>"$dir/log/start.log" || die "ceph-mon did not start"
	export CEPH_CONF="$dir/ceph.conf"
	uuid=$(uuidgen)
	id=$(timeout 30 ceph osd new "$uuid" 2>>"$dir/log/start.log") || die "ceph osd new failed (monitor down?)"
	mkdir -p "$dir/osd/ceph-$id"
	ceph-authtool --create-keyring "$dir/osd/ceph-$id/keyring" --gen-key -n "osd.$id" \
		>/dev/null || die "ceph-authtool (osd) failed"
	timeout 30 ceph auth add "osd.$id" osd 'allow *' mon 'allow profile osd' \
		-i "$dir/osd/ceph-$id/keyring" >/dev/null 2>>"$dir/log/start.log" ||
		die "ceph auth add osd.$id failed"
	ceph-osd -c "$dir/ceph.conf" -i "$id" --mkfs --osd-uuid "$uuid" \
		--keyring "$dir/osd/ceph-$id/keyring" >>"$dir/log/mkfs.log" 2>&1 ||
		die "ceph-osd --mkfs failed"
	ceph-osd -c "$dir/ceph.conf" -i "$id" --keyring "$dir/osd/ceph-$id/keyring" \
		2>>"$dir/log/start.log" || die "ceph-osd did not start"
	timeout 30 ceph osd pool create rbd 8 >/dev/null 2>>"$dir/log/start.log" ||
		die "ceph osd pool create failed"
	timeout 30 rbd pool init rbd 2>>"$dir/log/start.log" || die "rbd pool init failed"
	# Without a mgr nobody reports PG states: the cluster is usable once an
	# image can be made and written.
	timeout 60 rbd create --size 4M rbd/ceph-cluster-probe 2>>"$dir/log/start.log" ||
		die "the cluster took no image within 60 s"
	timeout 60 rbd rm rbd/ceph-cluster-probe >/dev/null 2>>"$dir/log/start.log" ||
		die "the cluster lost its probe image"
	echo "CEPH_CONF=$dir/ceph.conf; export CEPH_CONF"
	echo "CEPH_KEYRING=$kr; export CEPH_KEYRING"
}

case "${1:-}" in
start) [ $# -ge 2 ] || die "usage: ceph-cluster.sh start DIR [BYTES]"; start "$2" "${3:-}" ;;
stop) [ $# -ge 2 ] || die "usage: ceph-cluster.sh stop DIR"; stop "$2" ;;
*) die "usage: ceph-cluster.sh start|stop DIR" ;;
esac
