-- Staged update runs (issue 15): ClusterStagedUpdateStrategy, ClusterStagedUpdateRun and
-- ClusterApprovalRequest, which drive the placements whose strategy type is External.
--
-- staged_updates: each object as the rollout keeps it and the status service serves it
-- (fleetctl get csus / csur / careq): object is the Fleet-shaped object, a run with the
-- status the rollout computed. The rollout writes this table; the status service only reads
-- it. placement: the placement a run or an approval request is for (null for a strategy).
-- created_seq orders a placement's runs: the newest unfinished run drives it. progress: the
-- run's engine state beside its status (the times a stage's clusters finished, which a
-- TimedWait counts from; the clusters of each stage chosen at initialisation): in PostgreSQL,
-- so waits survive restarts. event_seq: the stream sequence of the newest event about the
-- object (a late one changes nothing).
create table staged_updates (
    kind        text        not null,
    name        text        not null,
    object      jsonb       not null,
    placement   text,
    progress    jsonb,
    deleted     boolean     not null default false,
    created_seq bigint      not null default 0,
    event_seq   bigint      not null default 0,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    primary key (kind, name)
);

create index staged_updates_placement on staged_updates (placement, kind) where not deleted;

---- create above / drop below ----

drop table staged_updates;
