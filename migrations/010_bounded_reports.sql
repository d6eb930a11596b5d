-- Apply reports and resource snapshots no longer grow with the placement (issue 10).
--
-- apply_results.counts: a report lists only the manifests worth showing (failed, not available,
-- drifted, differing; at most 100 of each kind) in results, and counts every manifest here:
-- {"total", "applied", "available", "notTrackable", "notTrackablePending", "drifted", "diffed",
-- "unlisted"}. Null for reports from before counts, whose results list every manifest.
alter table apply_results add column counts jsonb;

-- status_pieces.kind 'snapshot': the pieces of a resource snapshot's list of selected resources,
-- by snapshot index (revision), until every piece of the index is held.
alter table status_pieces drop constraint status_pieces_kind_check;
alter table status_pieces add constraint status_pieces_kind_check check (kind in ('decision', 'progress', 'snapshot'));

---- create above / drop below ----

delete from status_pieces where kind = 'snapshot';
alter table status_pieces drop constraint status_pieces_kind_check;
alter table status_pieces add constraint status_pieces_kind_check check (kind in ('decision', 'progress'));
alter table apply_results drop column counts;
