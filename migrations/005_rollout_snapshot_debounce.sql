-- The rollout's coalescing window becomes a debounce: each hub or spec change pushes a
-- placement's evaluation a short quiet period later, but never later than a maximum after the
-- window opened. snapshot_window_opened_at is when the open window began (null when none is).
alter table rollout_placements add column snapshot_window_opened_at timestamptz;

---- create above / drop below ----

alter table rollout_placements drop column snapshot_window_opened_at;
