-- Secret values at rest (issue 11). From this version no Secret value is stored in plain text:
-- the status service redacts them from every event it audits or folds, the rollout seals them
-- in hub_resources and resource_snapshots with its --encryption-key-file (it seals rows
-- stored before when it starts with a key: the key is not in the database), and work holding
-- a Secret travels as a blob on the bus, never inline in an outbox row. This migration removes
-- what earlier versions left in plain text:
--
-- audit_log.payload: hub resource events recorded with a Secret (or a Secret in a
-- ResourceEnvelope, or a Secret's differences in a report). The values become "(redacted)",
-- as api.RedactSecrets writes them. A Secret inside a ConfigMap envelope's YAML strings is
-- not found by this SQL; the status service redacts those in new events.
--
-- outbox.payload: WorkDesired events already published whose manifests may hold a Secret.
-- A published row's payload is never read again; it becomes empty.

create function pg_temp.redact_secrets(v jsonb) returns jsonb language plpgsql immutable as $$
declare
    out jsonb;
    f text;
    id jsonb;
begin
    case jsonb_typeof(v)
    when 'array' then
        select coalesce(jsonb_agg(pg_temp.redact_secrets(e) order by i), '[]'::jsonb) into out
        from jsonb_array_elements(v) with ordinality as t(e, i);
        return out;
    when 'object' then
        select coalesce(jsonb_object_agg(key, pg_temp.redact_secrets(value)), '{}'::jsonb) into out
        from jsonb_each(v);
    else
        return v;
    end case;
    -- A core Secret: its data, stringData and kubectl's copy of itself.
    if out->>'kind' = 'Secret' and out->>'apiVersion' = 'v1' then
        foreach f in array array['data', 'stringData'] loop
            if jsonb_typeof(out->f) = 'object' then
                out := jsonb_set(out, array[f],
                    (select coalesce(jsonb_object_agg(key, '"(redacted)"'::jsonb), '{}'::jsonb) from jsonb_each(out->f)));
            end if;
        end loop;
        if jsonb_typeof(out #> '{metadata,annotations}') = 'object'
           and (out #> '{metadata,annotations}') ? 'kubectl.kubernetes.io/last-applied-configuration' then
            out := jsonb_set(out, '{metadata,annotations,kubectl.kubernetes.io/last-applied-configuration}', '"(redacted)"');
        end if;
    end if;
    -- Differences reported for a Secret: every value at or under its data.
    id := case when jsonb_typeof(out->'resource') = 'object' then out->'resource' else out end;
    if id->>'kind' = 'Secret' and coalesce(id->>'group', '') = '' and id ? 'version' then
        foreach f in array array['drifts', 'diffs', 'observedDrifts', 'observedDiffs'] loop
            if jsonb_typeof(out->f) = 'array' then
                out := jsonb_set(out, array[f], (
                    select coalesce(jsonb_agg(
                        case when jsonb_typeof(d) = 'object' and (d->>'path' in ('', '/') or d->>'path' like '/data%'
                                  or d->>'path' like '/stringData%' or d->>'path' like '%last-applied-configuration%')
                             then d || jsonb_strip_nulls(jsonb_build_object(
                                     'valueInHub', case when coalesce(d->>'valueInHub', '') <> '' then '(redacted)' end,
                                     'valueInMember', case when coalesce(d->>'valueInMember', '') <> '' then '(redacted)' end))
                             else d end order by i), '[]'::jsonb)
                    from jsonb_array_elements(out->f) with ordinality as t(d, i)));
            end if;
        end loop;
    end if;
    return out;
end $$;

update audit_log set payload = pg_temp.redact_secrets(payload)
where payload::text like '%Secret%' and payload is distinct from pg_temp.redact_secrets(payload);

update outbox set payload = ''::bytea
where published_at is not null and type = 'io.flotilla.work.desired.v1'
  and position('"Secret"'::bytea in payload) > 0;

drop function pg_temp.redact_secrets(jsonb);

---- create above / drop below ----

-- Nothing to undo: redacted values are gone for good.
