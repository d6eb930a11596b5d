-- The scheduler's working state, so that a restarted scheduler resumes in seconds
-- without replaying history.

-- scheduler_bindings: each placement's current scheduling decision (the chosen clusters with
-- their scores, and why others were not chosen). It is what makes the next decision sticky.
-- The history of decisions is scheduling_decisions.
create table scheduler_bindings (
    placement         text        primary key,
    generation        bigint      not null,
    policy_generation bigint      not null,
    policy_key        text        not null,
    decision          jsonb       not null,
    event_id          text        not null,
    updated_at        timestamptz not null default now()
);

-- fleet_version counts changes to the member set that matter to scheduling (joins, leaves,
-- label/taint/property changes). A scheduler replica reloads its in-memory members when the
-- version it holds is behind.
create table fleet_version (
    id      boolean primary key default true check (id),
    version bigint  not null default 0
);
insert into fleet_version (version) values (0);

---- create above / drop below ----

drop table fleet_version;
drop table scheduler_bindings;
