-- The rollout service's state: the hub store, its view of each placement, and the rollout state
-- of each (placement, cluster). Every timer the rollout keeps (the snapshot coalescing window,
-- unavailablePeriodSeconds, the stuck deadline) is a timestamp here, so a restarted or another
-- replica picks it up where it was.

-- hub_resources: the hub store. One row per Kubernetes object published with
-- hub.resource.upserted, with the server-populated fields stripped. The core group and
-- cluster-scoped objects use the empty string. content_hash lets an unchanged re-publish change
-- nothing. A deleted object keeps its row (deleted = true) with the stream sequence of the
-- event that deleted it: replicas may handle two events about one object in either order, and
-- event_seq makes the later event win.
create table hub_resources (
    api_group    text        not null default '',
    version      text        not null,
    kind         text        not null,
    namespace    text        not null default '',
    name         text        not null,
    manifest     jsonb       not null,
    content_hash text        not null,
    deleted      boolean     not null default false,
    event_seq    bigint      not null default 0,
    event_id     text        not null,
    updated_at   timestamptz not null default now(),
    primary key (api_group, version, kind, namespace, name)
);
create index hub_resources_namespace on hub_resources (namespace) where namespace <> '' and not deleted;

-- rollout_placements: the rollout's view of each placement. spec is the defaulted spec (null
-- until the placement event arrives; decisions may come first); generation follows the same rule
-- as placements.generation (bumped on every spec change and on re-creation). spec_seq and
-- decision_seq are the JetStream stream sequences of the events last applied, so a redelivered
-- older event cannot undo a newer one. Per-placement work is serialised with SELECT ... FOR
-- UPDATE on this row.
create table rollout_placements (
    name             text        primary key,
    spec             jsonb,
    generation       bigint      not null default 0,
    spec_seq         bigint      not null default 0,
    deleted          boolean     not null default false,
    -- decision is the scheduler's latest PlacementScheduled payload.
    decision         jsonb,
    decision_seq     bigint      not null default 0,
    -- snapshot_due_at: the selection must be re-evaluated at this time (the end of the
    -- coalescing window opened by the first hub or spec change since the last evaluation).
    snapshot_due_at  timestamptz,
    -- wake_at: the next time a timer may change the rollout (a not-trackable cluster's
    -- unavailable period ends, a cluster reaches the stuck deadline).
    wake_at          timestamptz,
    -- selection_error: why the resource selectors are invalid (InvalidResourceSelectors).
    selection_error  text,
    -- progress_hash/progress_seq: the last RolloutProgressed emitted, so one is emitted only
    -- when progress changes, with a fresh deterministic id.
    progress_hash    text,
    progress_seq     bigint      not null default 0,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now()
);
create index rollout_placements_snapshot_due on rollout_placements (snapshot_due_at) where snapshot_due_at is not null;
create index rollout_placements_wake on rollout_placements (wake_at) where wake_at is not null;

-- rollout_clusters: what the rollout sent to each (placement, cluster) and what the apply worker
-- reported back. sent is 'work' (the cluster holds the placement) or 'tombstone'; work_key
-- hashes what a WorkDesired carries apart from the generation (snapshot index, apply and delete
-- strategy, unavailable period), and key_generation is the generation since which it has not
-- changed, so a report of any generation in [key_generation, sent_generation] answers it.
-- work_seq counts sends, and goes into the event ids.
create table rollout_clusters (
    placement        text        not null,
    cluster          text        not null,
    sent             text        check (sent in ('work', 'tombstone')),
    sent_index       integer,
    sent_generation  bigint,
    work_key         text,
    key_generation   bigint,
    sent_at          timestamptz,
    work_seq         bigint      not null default 0,
    -- report: the apply worker's latest report answering the sent work (a summary: conditions,
    -- which manifests are not trackable), report_seq its stream sequence.
    report           jsonb,
    report_seq       bigint      not null default 0,
    -- applied_at: when the sent work was first reported applied (unavailablePeriodSeconds runs
    -- from here for not-trackable objects).
    applied_at       timestamptz,
    -- target_key/target_since: the work the cluster should hold and since when; a cluster not
    -- ready with it by target_since + the stuck deadline is stuck.
    target_key       text,
    target_since     timestamptz,
    ready            boolean     not null default false,
    updated_at       timestamptz not null default now(),
    primary key (placement, cluster)
);

-- rollout_members: what the rollout needs to know of members: whether one left and with which
-- leave policy (Keep abandons the placed objects on it, Delete removes them).
create table rollout_members (
    name         text        primary key,
    left_fleet   boolean     not null default false,
    leave_policy text        not null default '',
    event_seq    bigint      not null default 0,
    updated_at   timestamptz not null default now()
);

-- resource_snapshots (from 001) keeps every index and hash for audit; only the newest
-- revisionHistoryLimit keep their manifests (older ones have manifests null and pruned_at set).
-- selected_resources lists the selected objects' identifiers (an envelope as itself) and is kept
-- for every snapshot, so "what did placement X select at revision N" is answered even after the
-- manifests are pruned.
alter table resource_snapshots
    alter column manifests drop not null,
    add column selected_resources jsonb       not null default '[]',
    add column generation         bigint,
    add column event_id           text,
    add column pruned_at          timestamptz;

---- create above / drop below ----

alter table resource_snapshots
    drop column pruned_at,
    drop column event_id,
    drop column generation,
    drop column selected_resources;
drop table rollout_members;
drop table rollout_clusters;
drop table rollout_placements;
drop table hub_resources;
