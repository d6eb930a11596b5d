-- 001_initial: Flotilla's system of record.
--
-- Conventions used throughout:
--   * Every time is timestamptz (UTC on the wire, the session's zone when read by a person).
--   * Object identity on a member cluster is (api_group, version, kind, namespace, name).
--     "group" is an SQL keyword, hence api_group. The core group and cluster-scoped objects use
--     the empty string, never NULL, so that identities compare and index cleanly.
--   * event_id is the CloudEvent id of the event that caused the row (also the JetStream
--     Nats-Msg-Id). It lets a person follow any row back to the audit log.
--   * History tables deliberately carry no foreign keys to placements or member_clusters:
--     events arrive from several streams and may be handled out of order (an apply result can be
--     stored before the placement row it belongs to), and history must outlive the things it is
--     about.

-- placements: the current desired state of each ClusterResourcePlacement, as last received.
-- generation bumps on every spec change; policy_generation only when spec.policy changes (the
-- scheduler reschedules on policy changes only). A deleted placement keeps its row (deleted =
-- true) so its history stays attached to a name. Services serialise per-placement work with
-- SELECT ... FOR UPDATE on this row.
create table placements (
    name              text        primary key,
    spec              jsonb       not null,
    generation        bigint      not null default 1,
    policy_generation bigint      not null default 1,
    deleted           boolean     not null default false,
    deleted_at        timestamptz,
    created_at        timestamptz not null default now(),
    updated_at        timestamptz not null default now()
);

-- policy_snapshots: immutable revisions of a placement's scheduling policy (Fleet's
-- ClusterSchedulingPolicySnapshot). A new snapshot is cut when the policy's content hash changes.
create table policy_snapshots (
    placement         text        not null,
    snapshot_index    integer     not null,
    policy_generation bigint      not null,
    content_hash      text        not null,
    policy            jsonb       not null,
    created_at        timestamptz not null default now(),
    primary key (placement, snapshot_index)
);

-- resource_snapshots: immutable revisions of the resources a placement selected (Fleet's
-- ClusterResourceSnapshot). Answers "what did placement X look like at revision N":
-- manifests holds the exact list of manifests rolled out for that index.
create table resource_snapshots (
    placement      text        not null,
    snapshot_index integer     not null,
    content_hash   text        not null,
    manifests      jsonb       not null,
    created_at     timestamptz not null default now(),
    primary key (placement, snapshot_index)
);

-- member_clusters: the fleet. labels/taints/properties are what the scheduler evaluates;
-- properties come from the apply worker's heartbeats (node count, allocatable cpu/memory, ...).
create table member_clusters (
    name         text        primary key,
    spec         jsonb       not null default '{}',
    labels       jsonb       not null default '{}',
    taints       jsonb       not null default '[]',
    properties   jsonb       not null default '{}',
    state        text        not null default 'joined' check (state in ('joined', 'left')),
    heartbeat_at timestamptz,
    joined_at    timestamptz not null default now(),
    left_at      timestamptz,
    updated_at   timestamptz not null default now()
);

-- scheduling_decisions: append-only record of every scheduling outcome, one row per
-- (decision, cluster). action says what happened to the cluster in this decision; not-selected
-- rows keep the reason a cluster was passed over, so "why is my placement not on cluster Y"
-- has an answer.
create table scheduling_decisions (
    id                    bigserial   primary key,
    placement             text        not null,
    policy_generation     bigint      not null,
    policy_snapshot_index integer,
    cluster               text        not null,
    action                text        not null check (action in ('added', 'kept', 'removed', 'not-selected')),
    affinity_score        integer,
    topology_spread_score integer,
    reason                text        not null default '',
    event_id              text        not null,
    decided_at            timestamptz not null default now()
);

-- apply_results: append-only per-cluster outcome of applying one resource snapshot. results
-- holds one entry per manifest (identity, applied, available, error, drift/diff summary);
-- applied/available summarise them. Use the apply_results_latest view for the current state.
create table apply_results (
    id                      bigserial   primary key,
    placement               text        not null,
    cluster                 text        not null,
    resource_snapshot_index integer     not null,
    results                 jsonb       not null default '[]',
    applied                 boolean     not null,
    available               boolean     not null,
    event_id                text        not null,
    observed_at             timestamptz not null default now()
);

-- takeover_decisions: append-only record of every attempt to adopt an object that already
-- existed on a member (whenToTakeOver). mode is Always|IfNoDiff|Never, comparison is
-- partialComparison|fullComparison; diff_paths lists the JSON pointers that differed (with
-- values) when a takeover was refused. Answers "who took over what, when, and why".
create table takeover_decisions (
    id          bigserial   primary key,
    placement   text        not null,
    cluster     text        not null,
    api_group   text        not null default '',
    version     text        not null,
    kind        text        not null,
    namespace   text        not null default '',
    name        text        not null,
    mode        text        not null,
    comparison  text        not null default '',
    outcome     text        not null check (outcome in ('taken', 'refused', 'not-taken-over')),
    diff_paths  jsonb       not null default '[]',
    event_id    text        not null,
    decided_at  timestamptz not null default now()
);

-- drift_reports: one row per drift episode of one object (first_observed_at starts it, later
-- observations of the same episode update drifts, last_observed_at and observed_generation).
-- drifts lists the JSON pointers that differ with the desired and the live values.
create table drift_reports (
    id                  bigserial   primary key,
    placement           text        not null,
    cluster             text        not null,
    api_group           text        not null default '',
    version             text        not null,
    kind                text        not null,
    namespace           text        not null default '',
    name                text        not null,
    drifts              jsonb       not null default '[]',
    observed_generation bigint,
    event_id            text        not null,
    first_observed_at   timestamptz not null,
    last_observed_at    timestamptz not null,
    unique (placement, cluster, api_group, version, kind, namespace, name, first_observed_at)
);

-- placement_status: the current Fleet-shaped status of each placement (conditions,
-- placementStatuses[], selectedResources, ...), exactly what `fleetctl get` shows.
create table placement_status (
    placement           text        primary key,
    status              jsonb       not null,
    observed_generation bigint      not null default 0,
    updated_at          timestamptz not null default now()
);

-- placement_status_transitions: append-only history of condition changes, placement-wide
-- (cluster is NULL) or per cluster. A row is written only when a condition's status or reason
-- changes, so this is the placement's timeline.
create table placement_status_transitions (
    id                  bigserial   primary key,
    placement           text        not null,
    cluster             text,
    condition_type      text        not null,
    status              text        not null check (status in ('True', 'False', 'Unknown')),
    reason              text        not null default '',
    message             text        not null default '',
    observed_generation bigint,
    event_id            text,
    at                  timestamptz not null default now()
);

-- audit_log: append-only copy of every event consumed, keyed by its CloudEvent id (a redelivered
-- event is stored once). payload is the event's data as JSON.
create table audit_log (
    id          bigserial   primary key,
    event_id    text        not null unique,
    type        text        not null,
    source      text        not null,
    subject     text        not null default '',
    time        timestamptz not null,
    payload     jsonb,
    received_at timestamptz not null default now()
);

-- inbox: the events each consumer has already handled. Insert (consumer, event_id) with
-- ON CONFLICT DO NOTHING in the same transaction as the event's effects; zero rows inserted
-- means the event was handled before: ack it and do nothing else.
create table inbox (
    consumer   text        not null,
    event_id   text        not null,
    handled_at timestamptz not null default now(),
    primary key (consumer, event_id)
);

-- outbox: events a service decided to emit, written in the same transaction as the decision.
-- A relay claims unpublished rows (FOR UPDATE SKIP LOCKED), publishes them to JetStream with
-- Nats-Msg-Id = event_id, and sets published_at after the PubAck. payload is the exact message
-- body (bytes, not jsonb, so it is relayed unchanged); headers holds the ce-* and other headers.
create table outbox (
    id           bigserial   primary key,
    event_id     text        not null unique,
    subject      text        not null,
    type         text        not null,
    headers      jsonb       not null default '{}',
    payload      bytea       not null,
    attempts     integer     not null default 0,
    last_error   text,
    created_at   timestamptz not null default now(),
    published_at timestamptz
);

-- Wake a LISTENing outbox relay when rows are added (it still sweeps periodically: a NOTIFY
-- is lost if no one is listening at that moment).
create function outbox_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('flotilla_outbox', '');
    return null;
end;
$$;

create trigger outbox_notify after insert on outbox
    for each statement execute function outbox_notify();

-- dead_letters: messages a consumer could never process (bad schema, unknown type, retries
-- exhausted), kept with the reason so nothing is silently dropped.
create table dead_letters (
    id         bigserial   primary key,
    consumer   text        not null,
    stream     text        not null default '',
    subject    text        not null,
    event_id   text,
    type       text,
    reason     text        not null,
    deliveries integer     not null default 0,
    headers    jsonb       not null default '{}',
    payload    bytea,
    dead_at    timestamptz not null default now()
);

-- Indexes for the audit questions in the README.
create index audit_log_type_time on audit_log (type, time);
create index audit_log_subject on audit_log (subject);
create index takeover_decisions_placement_decided_at on takeover_decisions (placement, decided_at);
create index drift_reports_cluster_last_observed_at on drift_reports (cluster, last_observed_at);
create index scheduling_decisions_placement_decided_at on scheduling_decisions (placement, decided_at);
create index apply_results_placement_cluster_observed_at on apply_results (placement, cluster, observed_at);
create index placement_status_transitions_placement_at on placement_status_transitions (placement, at);
create index outbox_unpublished on outbox (id) where published_at is null;

-- takeover_history: who took over what, when, and why, newest first.
create view takeover_history as
select decided_at,
       placement,
       cluster,
       case when api_group = '' then version else api_group || '/' || version end as api_version,
       kind,
       case when namespace = '' then name else namespace || '/' || name end as object,
       mode,
       comparison,
       outcome,
       diff_paths,
       event_id
from takeover_decisions
order by decided_at desc, id desc;

-- drift_this_week: every drift observed in the last seven days, newest first.
create view drift_this_week as
select cluster,
       placement,
       case when api_group = '' then version else api_group || '/' || version end as api_version,
       kind,
       case when namespace = '' then name else namespace || '/' || name end as object,
       first_observed_at,
       last_observed_at,
       observed_generation,
       drifts
from drift_reports
where last_observed_at >= now() - interval '7 days'
order by last_observed_at desc, id desc;

-- apply_results_latest: the most recent apply result of each (placement, cluster).
create view apply_results_latest as
select distinct on (placement, cluster)
       placement,
       cluster,
       resource_snapshot_index,
       applied,
       available,
       results,
       observed_at,
       event_id
from apply_results
order by placement, cluster, observed_at desc, id desc;
