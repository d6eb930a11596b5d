-- The status service's working state (what it folds placement and member status from) and the
-- views for the common audit questions. The status service writes audit_log, placement_status,
-- placement_status_transitions, takeover_decisions, drift_reports and apply_results (001).

-- status_placements: the status service's view of each placement: the fold inputs. placement is
-- the ClusterResourcePlacement as last upserted (defaulted, with metadata.generation), null until
-- its upsert arrives (a decision or report may come first). generation follows the same rule as
-- placements.generation; work_generation is the generation at which what the apply workers are
-- sent besides the manifests (apply and delete strategy, unavailablePeriodSeconds) last changed,
-- or the placement was re-created: rollout progress and apply reports for an older generation
-- answer superseded work. decision, snapshot and rollout are the latest PlacementScheduled,
-- SnapshotCreated and RolloutProgressed payloads. Per-placement folding is serialised with
-- SELECT ... FOR UPDATE on this row.
create table status_placements (
    name                text        primary key,
    placement           jsonb,
    generation          bigint      not null default 0,
    work_generation bigint      not null default 0,
    deleted             boolean     not null default false,
    decision            jsonb,
    snapshot            jsonb,
    rollout             jsonb,
    event_id            text,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now()
);

-- status_reports: the latest apply report (WorkReported payload) of each (placement, cluster).
-- A report answering a tombstone deletes the row. The history is apply_results.
create table status_reports (
    placement   text        not null,
    cluster     text        not null,
    report      jsonb       not null,
    observed_at timestamptz not null,
    event_id    text        not null,
    primary key (placement, cluster)
);

-- status_members: each member cluster as the status service serves it. inputs holds the member
-- as last joined/updated, whether it is joined, join/leave times and the latest heartbeat
-- (properties, resource usage, health); the Joined/Healthy conditions are computed from it when
-- queried, so a member that stopped sending heartbeats shows as such without any event.
create table status_members (
    name         text        primary key,
    inputs       jsonb       not null,
    joined       boolean     not null,
    heartbeat_at timestamptz,
    event_id     text        not null,
    updated_at   timestamptz not null default now()
);

-- Indexes for the status service's queries and the audit questions.
create index placement_status_transitions_placement_cluster_at on placement_status_transitions (placement, cluster, at);
create index takeover_decisions_cluster_decided_at on takeover_decisions (cluster, decided_at);
create index drift_reports_placement_last_observed_at on drift_reports (placement, last_observed_at);
create index apply_results_placement_index on apply_results (placement, resource_snapshot_index, cluster);
-- Snapshots as events: the audit log keeps every SnapshotCreated (index, hash, selected
-- resources) even where resource_snapshots has none (no rollout service writing this database).
create index audit_log_snapshot_placement on audit_log ((payload->>'placement'))
    where type = 'io.flotilla.resourcesnapshot.created.v1';

-- takeover_refusals: one row per differing field that refused a takeover ("why"), newest first.
create view takeover_refusals as
select t.decided_at,
       t.placement,
       t.cluster,
       case when t.api_group = '' then t.version else t.api_group || '/' || t.version end as api_version,
       t.kind,
       case when t.namespace = '' then t.name else t.namespace || '/' || t.name end as object,
       t.mode,
       t.comparison,
       t.outcome,
       d->>'path'          as path,
       d->>'valueInHub'    as value_in_hub,
       d->>'valueInMember' as value_in_member,
       t.event_id
from takeover_decisions t
cross join lateral jsonb_array_elements(t.diff_paths) as d
where t.outcome <> 'taken'
order by t.decided_at desc, t.id desc;

-- placement_revisions: every resource snapshot (revision) of every placement, from the snapshot
-- events: index, hash, the selected objects, when it was cut, and its manifests where the
-- rollout still keeps them (resource_snapshots; null once pruned by revisionHistoryLimit).
create view placement_revisions as
select a.payload->>'placement'                as placement,
       (a.payload->'index')::numeric::bigint  as revision,
       a.payload->>'hash'                     as content_hash,
       coalesce(a.payload->'selectedResources', '[]'::jsonb) as selected_resources,
       rs.manifests,
       a.time                                 as created_at,
       a.event_id
from audit_log a
left join resource_snapshots rs
       on rs.placement = a.payload->>'placement' and rs.snapshot_index = (a.payload->'index')::numeric::bigint
where a.type = 'io.flotilla.resourcesnapshot.created.v1' and jsonb_typeof(a.payload->'index') = 'number';

-- placement_revision_clusters: what each cluster reported for each revision of a placement: the
-- latest apply result per (placement, revision, cluster), with the failed manifests' reasons.
create view placement_revision_clusters as
select distinct on (placement, resource_snapshot_index, cluster)
       placement,
       resource_snapshot_index as revision,
       cluster,
       applied,
       available,
       (select coalesce(jsonb_agg(jsonb_build_object(
                   'kind', m->'resource'->>'kind',
                   'name', m->'resource'->>'name',
                   'namespace', m->'resource'->>'namespace',
                   'reason', m->'applied'->>'reason',
                   'message', m->'applied'->>'message')), '[]'::jsonb)
          from jsonb_array_elements(results) as m
         where m->'applied'->>'status' = 'False') as failed,
       observed_at,
       event_id
from apply_results
order by placement, resource_snapshot_index, cluster, observed_at desc, id desc;

-- placement_timeline: the condition transitions of every placement, readable: scope is
-- '(placement)' for the placement-wide conditions, else the cluster.
create view placement_timeline as
select at,
       placement,
       coalesce(cluster, '(placement)') as scope,
       condition_type,
       status,
       reason,
       message,
       observed_generation,
       event_id
from placement_status_transitions
order by placement, at, id;

-- current_failed_placements: the objects that fail on each cluster now, from the current status
-- (what `fleetctl get crp X -o jsonpath='{.status.placementStatuses}'` shows as failedPlacements).
create view current_failed_placements as
select s.placement,
       ps->>'clusterName'                as cluster,
       fp->>'kind'                       as kind,
       case when coalesce(fp->>'namespace', '') = '' then fp->>'name'
            else (fp->>'namespace') || '/' || (fp->>'name') end as object,
       fp->'condition'->>'type'          as condition_type,
       fp->'condition'->>'reason'        as reason,
       fp->'condition'->>'message'       as message,
       (fp->'condition'->>'lastTransitionTime')::timestamptz as since
from placement_status s
cross join lateral jsonb_array_elements(coalesce(s.status->'placementStatuses', '[]'::jsonb)) as ps
cross join lateral jsonb_array_elements(coalesce(ps->'failedPlacements', '[]'::jsonb)) as fp;

-- placement_events: the audit log with the placement each event concerns (payloads name it in
-- different places), for "everything that happened to placement X".
create view placement_events as
select a.time,
       case
           when jsonb_typeof(a.payload->'placement') = 'string' then a.payload->>'placement'
           when jsonb_typeof(a.payload->'placement') = 'object' then a.payload->'placement'->'metadata'->>'name'
           when a.type = 'io.flotilla.placement.deleted.v1' then a.payload->>'name'
       end as placement,
       a.payload->>'cluster' as cluster,
       a.type,
       a.source,
       a.subject,
       a.event_id,
       a.payload
from audit_log a
where a.payload ? 'placement' or a.type = 'io.flotilla.placement.deleted.v1';

---- create above / drop below ----

drop view placement_events;
drop view current_failed_placements;
drop view placement_timeline;
drop view placement_revision_clusters;
drop view placement_revisions;
drop view takeover_refusals;
drop index audit_log_snapshot_placement;
drop index apply_results_placement_index;
drop index drift_reports_placement_last_observed_at;
drop index takeover_decisions_cluster_decided_at;
drop index placement_status_transitions_placement_cluster_at;
drop table status_members;
drop table status_reports;
drop table status_placements;
