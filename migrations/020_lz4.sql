-- The status service rewrites each placement's status (one entry per cluster: 177 KB of
-- JSON for 100 clusters) and the fold inputs beside it for every batch of events that
-- changes it, and PostgreSQL compresses each new value with pglz, its default: in a
-- burst over hundreds of placements that was most of PostgreSQL's CPU. lz4 compresses
-- several times faster for about the same size. A server built without lz4 keeps pglz.
do $$
begin
	alter table placement_status alter column status set compression lz4;
	alter table status_placements alter column decision set compression lz4,
		alter column rollout set compression lz4, alter column snapshot set compression lz4,
		alter column placement set compression lz4;
	alter table status_reports alter column report set compression lz4;
	alter table audit_log alter column payload set compression lz4;
exception when feature_not_supported then
	raise notice 'lz4 is not supported by this server: values stay compressed with pglz';
end $$;

---- create above / drop below ----

do $$
begin
	alter table placement_status alter column status set compression default;
	alter table status_placements alter column decision set compression default,
		alter column rollout set compression default, alter column snapshot set compression default,
		alter column placement set compression default;
	alter table status_reports alter column report set compression default;
	alter table audit_log alter column payload set compression default;
exception when feature_not_supported then
	null;
end $$;
