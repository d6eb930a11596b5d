-- Bounded storage, and events that arrive late.
--
-- Retention: the services delete, in bounded batches on a timer, inbox rows handled longer
-- ago than --inbox-retention, outbox rows published longer ago than --outbox-retention and
-- audit_log rows received longer ago than --audit-retention (platform/retention). These
-- indexes let each batch find its oldest rows without reading the table.
create index inbox_handled_at on inbox (handled_at);
create index outbox_published_at on outbox (published_at) where published_at is not null;
create index audit_log_received_at on audit_log (received_at);

-- Late events lose: the stream sequence (JetStream's, on the EVENTS stream) of the newest
-- placement event (upserted or deleted) a service took, and of the newest member event
-- (joined, updated, left, heartbeat). An older event delivered after it (a redelivery after a
-- failed attempt) changes nothing. 0: none yet (rows from before this migration).
-- Refused updates (an immutable field changed) change nothing, the sequence included.
alter table placements add column spec_seq bigint not null default 0;
alter table member_clusters add column event_seq bigint not null default 0;
alter table status_placements add column spec_seq bigint not null default 0;
-- status_reports.event_seq: the stream sequence of the report held, which orders a cluster's
-- reports (not the observedAt the worker's clock gave them).
alter table status_reports add column event_seq bigint not null default 0;

-- member_clusters.heartbeat_at and status_members.heartbeat_at are from now on when the bus
-- received the heartbeat (the JetStream message's time, never later than the service's
-- clock), not the time the member claims: a member whose clock runs ahead, or that lies,
-- cannot look alive for longer than it is.
comment on column member_clusters.heartbeat_at is 'when the bus received the latest heartbeat (not the time the member claims)';
comment on column status_members.heartbeat_at is 'when the bus received the latest heartbeat (not the time the member claims)';

---- create above / drop below ----

comment on column status_members.heartbeat_at is null;
comment on column member_clusters.heartbeat_at is null;
alter table status_reports drop column event_seq;
alter table status_placements drop column spec_seq;
alter table member_clusters drop column event_seq;
alter table placements drop column spec_seq;
drop index audit_log_received_at;
drop index outbox_published_at;
drop index inbox_handled_at;
