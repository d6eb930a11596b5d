-- Overrides (issue 14): ClusterResourceOverride and ResourceOverride.
--
-- rollout_overrides: each override as the rollout holds it. override is the api.Override
-- (key, placement, selected objects, defaulted rules), null once deleted; snapshot_index
-- counts its changes from 0 (upstream's override snapshot <name>-<index>, which the
-- placement status lists as applicable) and starts over when the override is created again;
-- content_hash tells a change from a repeat. An override that selects an object another
-- override of its kind already selects is refused and not stored. event_seq: the stream
-- sequence of the newest event about it (a late one changes nothing).
create table rollout_overrides (
    kind           text        not null,
    namespace      text        not null default '',
    name           text        not null,
    override       jsonb,
    snapshot_index bigint      not null default 0,
    content_hash   text        not null default '',
    deleted        boolean     not null default false,
    event_seq      bigint      not null,
    event_id       text        not null,
    updated_at     timestamptz not null default now(),
    primary key (kind, namespace, name)
);

-- resource_snapshots.overrides: the overrides a snapshot applies (override.Snapshot: the
-- override and its snapshot index), null when none; the content hash covers them, so a
-- change of override cuts a new snapshot that rolls out under the placement's strategy.
alter table resource_snapshots add column overrides jsonb;

-- rollout_members.labels: the member's labels (with kubernetes-fleet.io/member-name), which
-- override rules select clusters by and ${MEMBER-CLUSTER-LABEL-KEY-<key>} reads.
alter table rollout_members add column labels jsonb;
update rollout_members r set labels = s.inputs->'member'->'metadata'->'labels'
from status_members s where s.name = r.name;

-- rollout_clusters.overrides: what the overrides did to the work last sent to the cluster
-- (events.ClusterOverrides: the applicable override snapshots, and why they failed when
-- they did: the cluster was then sent nothing new).
alter table rollout_clusters add column overrides jsonb;

-- status_overrides: each override as the status service serves it (fleetctl get cro / ro):
-- the object as the user applied it, in the version they wrote.
create table status_overrides (
    kind       text        not null,
    namespace  text        not null default '',
    name       text        not null,
    object     jsonb       not null,
    deleted    boolean     not null default false,
    event_seq  bigint      not null,
    event_id   text        not null,
    updated_at timestamptz not null default now(),
    primary key (kind, namespace, name)
);

---- create above / drop below ----

drop table status_overrides;
alter table rollout_clusters drop column overrides;
alter table rollout_members drop column labels;
alter table resource_snapshots drop column overrides;
drop table rollout_overrides;
