#!/bin/sh
# Starts Postgres the way the official postgres image does, for the variables docker-compose.yml
# sets: on an empty PGDATA it makes the cluster with POSTGRES_USER as superuser (password
# POSTGRES_PASSWORD, scram over TCP from anywhere) and creates POSTGRES_DB; then it runs
# postgres as PID 1, as the postgres user.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}" "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"

if [ "$(id -u)" = 0 ]; then
    # A fresh volume may be root's: give it to postgres, then drop root for good.
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "POSTGRES_PASSWORD is not set: set it to the password of $POSTGRES_USER" >&2
        exit 1
    fi
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --pgdata="$PGDATA" --username="$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
        # Only the local socket while the database is made, so no client sees it half-ready.
        pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -k /tmp" --wait --silent start
        createdb --host=/tmp --username="$POSTGRES_USER" "$POSTGRES_DB"
        pg_ctl --pgdata="$PGDATA" --mode=fast --wait --silent stop
    fi
    echo "made the cluster in $PGDATA with database $POSTGRES_DB"
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp "$@"
