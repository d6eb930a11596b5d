-- work_blobs: the manifests of work too large to travel inline in a WorkDesired event. They
-- are stored on the bus (stream WORKBLOBS, per cluster and placement, named by digest) and
-- referenced by the event. The rollout records each blob it stores; when newer work or a
-- tombstone replaces it, superseded_at is set, and the rollout purges the blob from the bus
-- some minutes later (a worker may still be reading it) and deletes the row.
create table work_blobs (
    cluster       text        not null,
    placement     text        not null,
    digest        text        not null,
    size          bigint      not null,
    chunks        integer     not null,
    stored_at     timestamptz not null default now(),
    superseded_at timestamptz,
    primary key (cluster, placement, digest)
);

create index work_blobs_superseded on work_blobs (superseded_at) where superseded_at is not null;

---- create above / drop below ----

drop table work_blobs;
