-- The outbox never blocks, and keeps each subject's events in commit order with any number of
-- relays (platform/outbox).
--
-- relay_partition: which of the 16 relay partitions the row belongs to (a hash of its subject,
-- so a subject's rows are all in one partition). A relay holds a partition with a session-level
-- advisory lock and publishes its rows in id order; no two relays publish one partition at once.
-- size: the encoded message (headers, Nats-Msg-Id and payload) in bytes, what NATS's max_payload
-- limits. retry_at: a row that failed to publish waits until then, and the rows behind it on
-- its subject with it (other subjects flow). first_failed_at, last_failed_at: its failures.
-- quarantined_at, quarantine_reason: a row that can never be published (over the bus limit,
-- headers that do not decode) or that failed too often leaves the publish queue for good; it
-- is kept, payload included, for inspection (view outbox_quarantine).
alter table outbox
    add column relay_partition smallint generated always as (abs(hashtext(subject) % 16)) stored,
    add column size              integer     not null default 0,
    add column retry_at          timestamptz,
    add column first_failed_at   timestamptz,
    add column last_failed_at    timestamptz,
    add column quarantined_at    timestamptz,
    add column quarantine_reason text;

-- Rows written before this migration: the size of what they will send, near enough.
update outbox set size = octet_length(payload) + octet_length(headers::text)
where published_at is null;

-- The publish queue of each partition, in id order.
drop index outbox_unpublished;
create index outbox_queue on outbox (relay_partition, id)
    where published_at is null and quarantined_at is null;
-- The rows waiting for a retry, which hold back the rows behind them on their subject.
create index outbox_retrying on outbox (subject, id)
    where published_at is null and quarantined_at is null and retry_at is not null;

-- outbox_quarantine: the events that were never published, with why. A row quarantined when
-- enqueued (over the bus limit) has no attempts; its failure times are its quarantine time.
create view outbox_quarantine as
select event_id,
       type,
       subject,
       size,
       quarantine_reason                          as reason,
       attempts,
       coalesce(first_failed_at, quarantined_at) as first_failed_at,
       coalesce(last_failed_at, quarantined_at)  as last_failed_at,
       quarantined_at,
       created_at
from outbox
where quarantined_at is not null;

---- create above / drop below ----

drop view outbox_quarantine;
drop index outbox_retrying;
drop index outbox_queue;
create index outbox_unpublished on outbox (id) where published_at is null;
alter table outbox
    drop column quarantine_reason,
    drop column quarantined_at,
    drop column last_failed_at,
    drop column first_failed_at,
    drop column retry_at,
    drop column size,
    drop column relay_partition;
