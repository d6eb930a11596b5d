-- Evictions and disruption budgets (issue 14): ClusterResourcePlacementEviction and
-- ClusterResourcePlacementDisruptionBudget.
--
-- disruptions: each object as the scheduler keeps it and the status service serves it
-- (fleetctl get crpe / crpdb): object is the Fleet-shaped object, an eviction with the status
-- (conditions Valid and Executed) the scheduler gave it when it ran, once. The scheduler
-- writes this table; the status service only reads it. placement: the placement an eviction
-- targets, or a budget's own name (the placement it protects). event_seq: the stream
-- sequence of the newest event about the object (a late one changes nothing).
create table disruptions (
    kind        text        not null,
    name        text        not null,
    object      jsonb       not null,
    placement   text        not null,
    deleted     boolean     not null default false,
    event_seq   bigint      not null default 0,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    primary key (kind, name)
);

create index disruptions_placement on disruptions (placement, kind) where not deleted;

---- create above / drop below ----

drop table disruptions;
