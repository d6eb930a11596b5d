-- status_quarantine: work the rollout could not send to a cluster (the outbox quarantined its
-- event; see outbox_quarantine), as the status service shows it in the cluster's
-- WorkSynchronized condition. The row goes when the cluster reports on other work than it
-- had reported when the notice came (report_index and report_generation; null: none).
create table status_quarantine (
    placement         text        not null,
    cluster           text        not null,
    notice            jsonb       not null,
    report_index      bigint,
    report_generation bigint,
    event_id          text        not null,
    primary key (placement, cluster)
);

---- create above / drop below ----

drop table status_quarantine;
