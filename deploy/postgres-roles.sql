-- Seedline in Postgres with least privilege: one login role per service.
--
-- Run it in the Seedline database, as a superuser (on a managed Postgres: a role
-- with CREATEROLE that owns the database and is a member of seedline_owner),
-- before the services start, and again after upgrading Seedline. It is idempotent.
--   psql -v ON_ERROR_STOP=1 -d seedline -f deploy/postgres-roles.sql
-- or: python -c "from seedline_platform.pg_roles import apply_roles; apply_roles(URL)"
--
-- seedline_owner (NOLOGIN) owns the schema and every table and is the only role
-- that runs DDL. The four login roles own nothing: they cannot create, alter,
-- drop, or touch a table they were not granted. Each holds only the DML its
-- service uses (RELIABILITY.md, Security, lists what each may do and the tests).
-- No passwords are set here; set them with ALTER ROLE seedline_writer PASSWORD '...'
-- (or pg_roles.set_passwords) and give each service its own SEEDLINE_DATABASE_URL.
--
-- The tables below are the services' own DDL, verbatim; tests/test_security_postgres.py
-- fails when a service's DDL and this file drift apart.

BEGIN;

-- 1. Roles (cluster-wide).
DO $$
DECLARE
    role_name text;
BEGIN
    FOREACH role_name IN ARRAY ARRAY['seedline_owner', 'seedline_writer', 'seedline_resolver',
                                     'seedline_composer', 'seedline_gateway'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = role_name) THEN
            EXECUTE format('CREATE ROLE %I', role_name);
        END IF;
    END LOOP;
END
$$;
ALTER ROLE seedline_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
ALTER ROLE seedline_writer LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
ALTER ROLE seedline_resolver LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
ALTER ROLE seedline_composer LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
ALTER ROLE seedline_gateway LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;

-- 2. This database: only the services connect, and only the owner creates objects.
DO $$
BEGIN
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO seedline_writer, seedline_resolver,'
                   ' seedline_composer, seedline_gateway', current_database());
END
$$;
ALTER SCHEMA public OWNER TO seedline_owner;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO seedline_writer, seedline_resolver, seedline_composer, seedline_gateway;

-- Tables a service created before this file was applied (under whichever role
-- it ran as) pass to the owner, so the DDL below and the grants apply to them.
ALTER TABLE IF EXISTS projection_offsets OWNER TO seedline_owner;
ALTER TABLE IF EXISTS timeline_entries OWNER TO seedline_owner;
ALTER TABLE IF EXISTS conversations OWNER TO seedline_owner;
ALTER TABLE IF EXISTS open_requests OWNER TO seedline_owner;
ALTER TABLE IF EXISTS briefs OWNER TO seedline_owner;
ALTER TABLE IF EXISTS live_conversations OWNER TO seedline_owner;
ALTER TABLE IF EXISTS machines OWNER TO seedline_owner;
ALTER TABLE IF EXISTS last_opens OWNER TO seedline_owner;

-- 3. Tables, created by the owner.
SET LOCAL ROLE seedline_owner;

-- every service (seedline_platform.pg.OFFSETS_SQL)
CREATE TABLE IF NOT EXISTS projection_offsets (
    projection text PRIMARY KEY,
    applied_seq bigint NOT NULL DEFAULT 0
);

-- timeline-writer (seedline_platform.timeline_table.DDL)
CREATE TABLE IF NOT EXISTS timeline_entries (
    seq bigint PRIMARY KEY,
    entry_id text NOT NULL UNIQUE,
    instance_id text NOT NULL,
    repo text NOT NULL,
    session_id text NOT NULL,
    kind text NOT NULL,
    content text NOT NULL,
    at text NOT NULL,
    engine text,
    truncated_from integer,
    repo_ordinal bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS timeline_entries_repo ON timeline_entries (instance_id, repo, seq);
CREATE INDEX IF NOT EXISTS timeline_entries_session
    ON timeline_entries (instance_id, repo, session_id, seq);
CREATE INDEX IF NOT EXISTS timeline_entries_kind
    ON timeline_entries (instance_id, repo, kind, seq);

-- continuity-resolver (seedline_continuity_resolver.projection.DDL)
CREATE TABLE IF NOT EXISTS conversations (
    session_id text PRIMARY KEY,
    instance_id text NOT NULL,
    repo text NOT NULL,
    last_activity timestamptz,
    activity_seq bigint NOT NULL DEFAULT 0,
    entry_engine text,
    open_engine text,
    node_id text,
    resume_key text,
    resume_node_id text
);
CREATE INDEX IF NOT EXISTS conversations_repo
    ON conversations (instance_id, repo, last_activity DESC NULLS LAST, activity_seq DESC);
CREATE TABLE IF NOT EXISTS open_requests (
    instance_id text NOT NULL,
    request_id text NOT NULL,
    session_id text NOT NULL,
    reply bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, request_id)
);
CREATE INDEX IF NOT EXISTS open_requests_session ON open_requests (session_id);

-- seed-composer (seedline_seed_composer.briefs.DDL)
CREATE TABLE IF NOT EXISTS briefs (
    session_id text PRIMARY KEY,
    decided_seq bigint NOT NULL,
    text text NOT NULL,
    rows integer NOT NULL,
    chars integer NOT NULL,
    omitted_rows integer NOT NULL,
    until_seq bigint NOT NULL,
    sha256 text NOT NULL
);

-- runner-gateway (seedline_runner_gateway.state.DDL)
CREATE TABLE IF NOT EXISTS live_conversations (
    session_id text PRIMARY KEY,
    instance_id text NOT NULL,
    repo text NOT NULL,
    node_id text NOT NULL,
    engine text NOT NULL,
    opened_at timestamptz NOT NULL,
    last_activity timestamptz NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS live_conversations_repo ON live_conversations (instance_id, repo);
CREATE TABLE IF NOT EXISTS machines (
    node_id text PRIMARY KEY,
    label text NOT NULL,
    last_seen timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS last_opens (
    instance_id text PRIMARY KEY,
    node_id text NOT NULL,
    engine text NOT NULL,
    at timestamptz NOT NULL
);

-- 4. Grants: start from nothing, so running this again also takes back what a
-- newer version of this file no longer grants.
REVOKE ALL ON ALL TABLES IN SCHEMA public
    FROM PUBLIC, seedline_writer, seedline_resolver, seedline_composer, seedline_gateway;

-- timeline-writer: the only writer of the timeline projection. It appends (COPY
-- needs INSERT) and never updates or deletes a row; TRUNCATE is for
-- `seedline rebuild timeline`, which replays the stream into an empty table.
GRANT SELECT, INSERT, TRUNCATE ON timeline_entries TO seedline_writer;

-- continuity-resolver: reads the timeline, keeps conversations and the
-- request-id ledger (TRUNCATE: its rebuild).
GRANT SELECT ON timeline_entries TO seedline_resolver;
GRANT SELECT, INSERT, UPDATE, TRUNCATE ON conversations TO seedline_resolver;
GRANT SELECT, INSERT, UPDATE ON open_requests TO seedline_resolver;

-- seed-composer: reads the timeline, keeps the briefs.
GRANT SELECT ON timeline_entries TO seedline_composer;
GRANT SELECT, INSERT, UPDATE ON briefs TO seedline_composer;

-- runner-gateway: which conversations are live where, machines, last opens.
-- It reads neither the timeline nor the briefs.
GRANT SELECT, INSERT, UPDATE, DELETE ON live_conversations TO seedline_gateway;
GRANT SELECT, INSERT, UPDATE ON machines, last_opens TO seedline_gateway;

-- projection_offsets: everyone reads every offset (read-your-writes waits on
-- another service's); a service writes only the rows of its own projections.
GRANT SELECT ON projection_offsets
    TO seedline_writer, seedline_resolver, seedline_composer, seedline_gateway;
GRANT INSERT, UPDATE ON projection_offsets TO seedline_writer, seedline_resolver;
GRANT DELETE ON projection_offsets TO seedline_resolver;

ALTER TABLE projection_offsets ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS offsets_read ON projection_offsets;
DROP POLICY IF EXISTS offsets_writer ON projection_offsets;
DROP POLICY IF EXISTS offsets_resolver ON projection_offsets;
CREATE POLICY offsets_read ON projection_offsets FOR SELECT USING (true);
CREATE POLICY offsets_writer ON projection_offsets FOR ALL TO seedline_writer
    USING (projection = 'timeline') WITH CHECK (projection = 'timeline');
CREATE POLICY offsets_resolver ON projection_offsets FOR ALL TO seedline_resolver
    USING (projection LIKE 'resolver.%') WITH CHECK (projection LIKE 'resolver.%');

COMMIT;
