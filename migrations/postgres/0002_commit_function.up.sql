-- hxd schema v2 (PostgreSQL): hxd_commit, the server side of a boundary
-- commit whose run seqs the committer knows (its lease cached them). One
-- call, sent on its own (an implicit transaction, no BEGIN or COMMIT of
-- its own), does what took about ten statements: the lease fence, the run
-- update, the session's latest run, snapshot, step and tool rows, the
-- journal and event appends and the read of the control flags. It sends no
-- NOTIFY: inside a commit, a NOTIFY holds a database-wide lock until the
-- commit is flushed, which serialises every notifying commit (hxd sends
-- them after the commit, in batches).
--
-- Every argument is an array, one element per boundary (or per row), so
-- one call carries one boundary or several of different sessions; empty
-- arrays write nothing. When the committer's optimism fails, the call
-- raises SQLSTATE HX001 (a session no longer held by the lease named, a
-- run missing from its session), or a record or event id already stored
-- (or a seq taken) fails the append with 23505 unique_violation; either
-- way nothing is written, and the committer redoes the boundary the
-- careful way (reads first), which gives it its own outcome.
--
-- It returns the sessions fenced whose control flag is set.
--
-- Never edit this file once released: hxd checks its SHA-256 at start-up.

CREATE FUNCTION hxd_commit(
    f_id text[], f_owner text[], f_generation bigint[],
    r_id text[], r_session text[], r_status text[], r_phase text[], r_payload text[], r_updated timestamptz[],
    l_session text[], l_run text[],
    sn_session text[], sn_payload text[],
    st_run text[], st_id text[], st_payload text[],
    ap_run text[], ap_id text[], ap_payload text[],
    to_run text[], to_id text[], to_payload text[],
    j_run text[], j_seq bigint[], j_id text[], j_payload text[],
    e_run text[], e_seq bigint[], e_id text[], e_payload text[]
) RETURNS TABLE (o_session text, o_control text)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    c_ids text[];
    c_vals text[];
BEGIN
    -- The fence: every session still held by its lease (owner, generation,
    -- expiry on the database clock), its row locked until the commit, in
    -- id order so that concurrent commits do not deadlock.
    SELECT count(*), array_agg(f.id) FILTER (WHERE f.control <> ''), array_agg(f.control) FILTER (WHERE f.control <> '')
    INTO n, c_ids, c_vals
    FROM (SELECT s.id, s.control FROM sessions AS s
          JOIN unnest(f_id, f_owner, f_generation) AS u (id, owner, generation) ON s.id = u.id
          WHERE s.owner = u.owner AND s.generation = u.generation AND s.lease_until > clock_timestamp()
          ORDER BY s.id
          FOR NO KEY UPDATE OF s) AS f;
    IF n <> cardinality(f_id) THEN
        RAISE EXCEPTION 'hxd_commit: % of % sessions not held by their lease', cardinality(f_id) - n, cardinality(f_id)
            USING ERRCODE = 'HX001';
    END IF;

    IF cardinality(r_id) > 0 THEN
        UPDATE runs AS r
        SET status = u.status, phase = u.phase, payload = COALESCE(u.payload::json, r.payload), updated_at = u.updated_at
        FROM unnest(r_id, r_session, r_status, r_phase, r_payload, r_updated)
            AS u (id, session_id, status, phase, payload, updated_at)
        WHERE r.id = u.id AND r.session_id = u.session_id;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> cardinality(r_id) THEN
            RAISE EXCEPTION 'hxd_commit: % of % runs not found in their session', cardinality(r_id) - n, cardinality(r_id)
                USING ERRCODE = 'HX001';
        END IF;
    END IF;

    IF cardinality(l_session) > 0 THEN
        UPDATE sessions AS s SET last_run_id = u.run_id
        FROM unnest(l_session, l_run) AS u (id, run_id)
        WHERE s.id = u.id AND s.last_run_id IS DISTINCT FROM u.run_id;
    END IF;
    IF cardinality(sn_session) > 0 THEN
        INSERT INTO snapshots (session_id, payload)
        SELECT u.id, u.payload::json FROM unnest(sn_session, sn_payload) AS u (id, payload)
        ON CONFLICT (session_id) DO UPDATE SET payload = excluded.payload;
    END IF;
    IF cardinality(st_run) > 0 THEN
        INSERT INTO steps (run_id, id, payload)
        SELECT u.run_id, u.id, u.payload::json FROM unnest(st_run, st_id, st_payload) AS u (run_id, id, payload)
        ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload;
    END IF;
    IF cardinality(ap_run) > 0 THEN
        INSERT INTO approvals (run_id, id, payload)
        SELECT u.run_id, u.id, u.payload::json FROM unnest(ap_run, ap_id, ap_payload) AS u (run_id, id, payload)
        ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload;
    END IF;
    IF cardinality(to_run) > 0 THEN
        INSERT INTO tool_outcomes (run_id, id, payload)
        SELECT u.run_id, u.id, u.payload::json FROM unnest(to_run, to_id, to_payload) AS u (run_id, id, payload)
        ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload;
    END IF;

    -- Plain INSERTs: a record or event id already stored, or a seq taken
    -- by a writer that bypassed the lease, fails the call (23505).
    IF cardinality(j_run) > 0 THEN
        INSERT INTO journal (run_id, seq, id, payload)
        SELECT u.run_id, u.seq, u.id, u.payload::json FROM unnest(j_run, j_seq, j_id, j_payload) AS u (run_id, seq, id, payload);
    END IF;
    IF cardinality(e_run) > 0 THEN
        INSERT INTO events (run_id, seq, event_id, payload)
        SELECT u.run_id, u.seq, u.id, u.payload::json FROM unnest(e_run, e_seq, e_id, e_payload) AS u (run_id, seq, id, payload);
    END IF;

    RETURN QUERY SELECT u.id, u.control FROM unnest(c_ids, c_vals) AS u (id, control);
END
$$;
