-- Failover and failback (issue 16). The scheduler decides them; their timers are here, so a
-- restarted scheduler resumes them.
--
-- member_clusters.healthy, health_message: what the member's latest heartbeat said of its API
-- server; health_since: when the member last became healthy or unhealthy (a heartbeat after
-- 1.5 heartbeat periods of silence counts as becoming healthy). A member is down when its
-- heartbeats say it is unhealthy, or when none arrived for 1.5 periods.
alter table member_clusters add column healthy boolean not null default true;
alter table member_clusters add column health_message text not null default '';
alter table member_clusters add column health_since timestamptz;

-- placements.failover_after_ms, failback_after_ms: the placement's annotations
-- flotilla.dev/failover-after and flotilla.dev/failback-after (null when unset: the
-- scheduler's --failover-after applies, failback is off).
alter table placements add column failover_after_ms bigint;
alter table placements add column failback_after_ms bigint;

-- scheduler_bindings.wake_at: when the placement's decision may change with no event (a
-- member's grace period or failback period ends); the scheduler re-decides it then.
alter table scheduler_bindings add column wake_at timestamptz;
create index scheduler_bindings_wake_at on scheduler_bindings (wake_at) where wake_at is not null;

-- scheduling_decisions: a cluster released by failover or failback (its copy removed
-- make-before-break) is recorded as 'released'.
alter table scheduling_decisions drop constraint scheduling_decisions_action_check;
alter table scheduling_decisions add constraint scheduling_decisions_action_check
    check (action in ('added', 'kept', 'removed', 'not-selected', 'released'));

-- failover_history: append-only, one row per failover step of a placement: 'lost' (a member
-- is lost and the placement waits: PickAll, PickFixed, or no replacement fits), 'failover'
-- (moved from from_cluster to to_cluster), 'returned' (the lost from_cluster is back) and
-- 'failback' (moved back from from_cluster to to_cluster). message says why.
--   select at, kind, from_cluster, to_cluster, message from failover_history
--   where placement = 'web' order by at;
create table failover_history (
    id           bigserial   primary key,
    placement    text        not null,
    kind         text        not null check (kind in ('lost', 'failover', 'returned', 'failback')),
    from_cluster text        not null,
    to_cluster   text        not null default '',
    message      text        not null,
    event_id     text        not null,
    at           timestamptz not null default now()
);
create index failover_history_placement_at on failover_history (placement, at);

---- create above / drop below ----

drop table failover_history;
delete from scheduling_decisions where action = 'released';
alter table scheduling_decisions drop constraint scheduling_decisions_action_check;
alter table scheduling_decisions add constraint scheduling_decisions_action_check
    check (action in ('added', 'kept', 'removed', 'not-selected'));
drop index scheduler_bindings_wake_at;
alter table scheduler_bindings drop column wake_at;
alter table placements drop column failback_after_ms;
alter table placements drop column failover_after_ms;
alter table member_clusters drop column health_since;
alter table member_clusters drop column health_message;
alter table member_clusters drop column healthy;
