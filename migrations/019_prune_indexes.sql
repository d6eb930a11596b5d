-- Indexes for pruning (platform/retention reads the rows it deletes by their time column):
-- the scheduler prunes decided evictions and deleted disruption rows by updated_at
-- (--eviction-retention) and failover_history by at (--failover-retention).
create index disruptions_prunable on disruptions (updated_at) where deleted or kind = 'ClusterResourcePlacementEviction';
create index failover_history_at on failover_history (at);

---- create above / drop below ----

drop index failover_history_at;
drop index disruptions_prunable;
