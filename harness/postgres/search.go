package postgres

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Found is where Search found a string.
type Found struct {
	// Relation is the table or view, schema-qualified.
	Relation string
	// Needle is the string found; Row is the row holding it, as PostgreSQL prints a row.
	Needle, Row string
}

func (f Found) String() string { return fmt.Sprintf("%s holds %q in %s", f.Relation, f.Needle, f.Row) }

// Search reads every row of every table and view in every schema but PostgreSQL's own and
// reports where any of the needles occurs: in a value as text, or in a bytea value (which
// prints as hex). It returns the relations it read, so a caller can tell that it looked.
func Search(ctx context.Context, pool *pgxpool.Pool, needles ...string) (relations []string, found []Found, err error) {
	rows, err := pool.Query(ctx, `
		select quote_ident(table_schema) || '.' || quote_ident(table_name) from information_schema.tables
		where table_schema not in ('pg_catalog', 'information_schema') and table_schema not like 'pg_toast%'
		order by 1`)
	if err != nil {
		return nil, nil, fmt.Errorf("list tables and views: %w", err)
	}
	if relations, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, nil, fmt.Errorf("list tables and views: %w", err)
	}
	forms := map[string]string{} // how a needle may be printed -> the needle
	for _, n := range needles {
		forms[n] = n
		forms[hex.EncodeToString([]byte(n))] = n
	}
	for _, rel := range relations {
		rows, err := pool.Query(ctx, "select r::text from "+rel+" r")
		if err != nil {
			return relations, found, fmt.Errorf("read %s: %w", rel, err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return relations, found, fmt.Errorf("read %s: %w", rel, err)
		}
		for _, row := range texts {
			for form, needle := range forms {
				if strings.Contains(row, form) {
					found = append(found, Found{Relation: rel, Needle: needle, Row: row})
				}
			}
		}
	}
	return relations, found, nil
}
