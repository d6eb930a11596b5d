-- drop_dead_letters: dead letters are kept in JetStream's DEADLETTER stream only (30 days), where
-- every consumer can record them: apply workers, which keep no database, and hub services while
-- PostgreSQL is what is failing. `fleetctl deadletters` lists, shows and redrives them from
-- there. This table, never written, goes.
drop table dead_letters;

---- create above / drop below ----

create table dead_letters (
    id         bigserial   primary key,
    consumer   text        not null,
    stream     text        not null default '',
    subject    text        not null,
    event_id   text,
    type       text,
    reason     text        not null,
    deliveries integer     not null default 0,
    headers    jsonb       not null default '{}',
    payload    bytea,
    dead_at    timestamptz not null default now()
);
