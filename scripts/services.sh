#!/usr/bin/env bash
# Make sure the services the tests use are up: PostgreSQL (127.0.0.1:5432, database `test`)
# and Redis (127.0.0.1:6379). Starts them when they are installed but stopped; fails loudly
# (exit 1, with what to do) when they cannot be started. Tests never skip silently.
set -u

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ! pg_up; then
  echo "services: PostgreSQL is not answering on 127.0.0.1:5432; trying to start it" >&2
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    for cluster in /etc/postgresql/*/main; do
      [ -d "$cluster" ] || continue
      version=$(basename "$(dirname "$cluster")")
      pg_ctlcluster "$version" main start >&2 || true
    done
  fi
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
fi
if ! pg_up; then
  echo "services: ERROR: PostgreSQL is not running at 127.0.0.1:5432 and could not be started." >&2
  echo "          Install and start it (trust auth, database 'test'), e.g. apt-get install postgresql." >&2
  exit 1
fi
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" 2>/dev/null | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE test" >/dev/null 2>&1 || true

if ! redis_up; then
  echo "services: Redis is not answering on 127.0.0.1:6379; trying to start it" >&2
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --port 6379 --bind 127.0.0.1 --daemonize yes --save "" --appendonly no >&2 || true
  fi
  for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
fi
if ! redis_up; then
  echo "services: ERROR: Redis is not running at 127.0.0.1:6379 and could not be started." >&2
  echo "          Install and start it, e.g. apt-get install redis-server." >&2
  exit 1
fi
echo "services: PostgreSQL and Redis are up" >&2
