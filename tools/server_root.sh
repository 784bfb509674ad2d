#!/usr/bin/env bash
# Put a newer MySQL or MariaDB server than the machine's Debian has into a private root,
# without installing anything system-wide: the .deb files of one Debian suite (and the
# libraries they need, libc included) are fetched with a private apt state and unpacked with
# `dpkg -x`; the binaries then run under that root's own loader (cdc.embedded does that).
#
#   tools/server_root.sh mysql-9.7   [DEST]   # Debian sid:    mysql-server-core 9.7
#   tools/server_root.sh mariadb-11.8 [DEST]  # Debian trixie: mariadb-server-core 11.8
#
# DEST defaults to ~/.cache/binlog-cdc/servers/<name>; a root that is already complete
# (DEST/.complete) is left as it is.  Prints DEST on stdout.
set -euo pipefail

name=${1:?usage: tools/server_root.sh mysql-9.7|mariadb-11.8 [DEST]}
case "$name" in
    mysql-9.7)    suite=sid;    pkgs="mysql-server-core mysql-client-core" ;;
    mariadb-11.8) suite=trixie; pkgs="mariadb-server-core mariadb-client-core mariadb-client" ;;
    *) echo "server_root.sh: unknown server '$name' (mysql-9.7 or mariadb-11.8)" >&2; exit 2 ;;
esac
dest=${2:-${XDG_CACHE_HOME:-$HOME/.cache}/binlog-cdc/servers/$name}
if [ -e "$dest/.complete" ]; then echo "$dest"; exit 0; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
echo "deb http://deb.debian.org/debian $suite main" > "$work/sources.list"
apt=(-o "Dir::State=$work" -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
     -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
     -o "Dir::State::status=/dev/null" -o "APT::Architecture=amd64" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt-get "${apt[@]}" update -qq >&2
# The packages and every library they need (recursively); perl and friends are left out:
# the server does not need them to start or to replicate.
deps=$(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
         --no-breaks --no-replaces --no-enhances $pkgs 2>/dev/null \
       | grep -v '^[ <]' | sort -u \
       | grep -Ev '^(perl|perl-base|perl-modules-.*|libperl.*|debconf|adduser|mariadb-common|mysql-common|mariadb-client-compat|passwd|login|init-system-helpers|lsb-base|procps|psmisc|sensible-utils|gawk|rsync|netcat.*|socat|libdbi-perl|libdbd-.*)$' || true)
(cd "$work/debs" && apt-get "${apt[@]}" download -qq $deps >&2)
rm -rf "$dest.partial"
mkdir -p "$dest.partial"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$dest.partial"; done
# the loader lives at /usr/lib64/ld-linux-x86-64.so.2 (a link into the multiarch dir)
test -e "$dest.partial/usr/lib64/ld-linux-x86-64.so.2" \
    || { echo "server_root.sh: no loader in the unpacked libc6" >&2; exit 1; }
# run/: a wrapper for every ELF program that execs it under the root's loader and libraries,
# beside links to share/ and lib/, so run/ works as a --basedir (mariadb-install-db, mysqld)
mkdir -p "$dest.partial/run/bin" "$dest.partial/run/sbin"
for dir in bin sbin; do
    for prog in "$dest.partial/usr/$dir"/*; do
        [ -f "$prog" ] && [ "$(head -c 4 "$prog" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
        cat > "$dest.partial/run/$dir/${prog##*/}" <<WRAP
#!/bin/sh
root=\$(cd "\$(dirname "\$0")/../.." && pwd)
exec "\$root/usr/lib64/ld-linux-x86-64.so.2" --library-path "\$root/usr/lib/x86_64-linux-gnu" \\
    "\$root/usr/$dir/${prog##*/}" "\$@"
WRAP
        chmod +x "$dest.partial/run/$dir/${prog##*/}"
    done
done
ln -s ../usr/share "$dest.partial/run/share"
ln -s ../usr/lib "$dest.partial/run/lib"
rm -rf "$dest"
mv "$dest.partial" "$dest"
ls "$work/debs" > "$dest/.complete"
echo "$dest"
