-- Scheduling decisions, rollout progress and status changes travel as numbered revisions in
-- bounded pieces (io.flotilla.placement.scheduled.v2, rollout.progressed.v2,
-- placementstatus.changed.v2): a base revision lists every cluster, the others only the clusters
-- that changed. Producers count their revisions per placement; consumers keep the pieces they
-- cannot apply yet and the revision they applied last.
--
-- The assembled states keep their columns and their JSON (rollout_placements.decision,
-- status_placements.decision and .rollout): a v1 payload stored there reads as revision 0, and
-- every producer's first v2 revision of a placement is a base.

-- placements.decision_revision: the scheduler's last decision revision of the placement. It
-- survives deletion (the row stays), so a re-created placement's decisions count on.
alter table placements add column decision_revision bigint not null default 0;

-- rollout_placements.progress_revision: the rollout's last progress revision of the placement.
-- rollout_clusters.reported: the cluster's entry in the progress as last reported (null when the
-- cluster is not in it), so the next revision lists only the clusters whose entry changed.
alter table rollout_placements add column progress_revision bigint not null default 0;
alter table rollout_clusters add column reported jsonb;

-- status_placements.status_revision: the status service's last status change revision.
alter table status_placements add column status_revision bigint not null default 0;

-- rollout_pieces, status_pieces: the pieces a consumer holds of revisions it cannot apply yet
-- (a piece of a revision whose other pieces have not arrived, or a revision after one that has
-- not). kind is 'decision' (placement.scheduled) or 'progress' (rollout.progressed). A piece is
-- written in the transaction that consumes it, with its inbox row; the pieces of the revisions
-- applied, and of every revision before them, are deleted in the transaction that applies them.
create table rollout_pieces (
    placement text        not null,
    kind      text        not null check (kind in ('decision')),
    revision  bigint      not null,
    piece     integer     not null,
    pieces    integer     not null,
    base      boolean     not null,
    payload   jsonb       not null,
    held_at   timestamptz not null default now(),
    primary key (placement, kind, revision, piece)
);

create table status_pieces (
    placement text        not null,
    kind      text        not null check (kind in ('decision', 'progress')),
    revision  bigint      not null,
    piece     integer     not null,
    pieces    integer     not null,
    base      boolean     not null,
    payload   jsonb       not null,
    held_at   timestamptz not null default now(),
    primary key (placement, kind, revision, piece)
);

---- create above / drop below ----

drop table status_pieces;
drop table rollout_pieces;
alter table status_placements drop column status_revision;
alter table rollout_clusters drop column reported;
alter table rollout_placements drop column progress_revision;
alter table placements drop column decision_revision;
