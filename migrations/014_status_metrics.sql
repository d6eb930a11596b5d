-- What the status service's metrics read (flotilla_placements and
-- flotilla_placement_time_to_available_seconds, services/status/metrics.go).
--
-- placement_status.conditions: the placement-wide conditions of status, kept beside it, so that
-- counting placements by condition at each scrape reads a few hundred bytes a placement instead
-- of its whole status (which grows with its clusters).
-- status_placements.generation_at: the time of the event that brought the placement's current
-- generation; available_generation: the last generation whose placement-wide Available
-- condition turned True, so that each generation counts once in the time to Available.
alter table placement_status add column conditions jsonb not null default '[]';
update placement_status set conditions = coalesce(status->'conditions', '[]'::jsonb);

alter table status_placements
    add column generation_at        timestamptz,
    add column available_generation bigint not null default 0;
-- Placements from before: their current generation is not timed.
update status_placements set available_generation = generation;

---- create above / drop below ----

alter table status_placements drop column available_generation, drop column generation_at;
alter table placement_status drop column conditions;
