package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkRowFloor prices the rows of a boundary alone, with no hxd code
// in the way: 64 concurrent "runs" each commit boundaries of k rows through
// an ideal group commit (two committer connections; each takes every
// boundary waiting, writes all their rows with one INSERT … unnest of a
// table with a primary key and one UNIQUE text id, BEGIN, INSERT and
// COMMIT pipelined in one round trip, then acknowledges them), against 64
// raw committers doing single-row autocommit INSERTs, interleaved in the
// same run on the same database. x-raw = boundaries/s ÷ raw commits/s.
// A real boundary of a recorded run writes about 9 rows in 6 tables (see
// BenchmarkBoundaryThroughput), and in more statements; this is the
// ceiling any layout writing k rows per boundary can reach here.
func BenchmarkRowFloor(b *testing.B) {
	const runs, committers, per = 64, 2, 20
	for _, k := range []int{1, 3, 6, 9} {
		b.Run(fmt.Sprintf("rows=%d", k), func(b *testing.B) {
			ctx := context.Background()
			url := testURL(b)
			schema := newSchemaName(b, "hxd floor ")
			if err := adminExec(b, ctx, "", "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
				b.Fatal(err)
			}
			raw := rawCommitters(b, ctx, url, schema, runs+committers)
			group, raw := raw[:committers], raw[committers:]
			if _, err := group[0].Exec(ctx, `CREATE TABLE floor_rows (
				k bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
				run_id text NOT NULL, id text NOT NULL UNIQUE, payload json NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			payload := `{"kind":"model.completed","usage":{"input_tokens":812,"output_tokens":64},"stop_reason":"end_turn","text":"The invoice total is 42.00 EUR."}`

			queue := make(chan chan error, runs)
			var wg sync.WaitGroup
			for _, conn := range group {
				wg.Go(func() {
					for first := range queue {
						waiting := []chan error{first}
					more:
						for len(waiting) < runs {
							select {
							case c, ok := <-queue:
								if !ok {
									break more
								}
								waiting = append(waiting, c)
							default:
								break more
							}
						}
						n := len(waiting) * k
						runIDs, ids, payloads := make([]string, n), make([]string, n), make([]string, n)
						for i := range n {
							runIDs[i], ids[i], payloads[i] = "run", benchID(), payload
						}
						batch := &pgx.Batch{}
						batch.Queue(`BEGIN`)
						batch.Queue(`INSERT INTO floor_rows (run_id, id, payload) SELECT * FROM unnest($1::text[], $2::text[], $3::json[])`, runIDs, ids, payloads)
						batch.Queue(`COMMIT`)
						err := conn.SendBatch(ctx, batch).Close()
						for _, c := range waiting {
							c <- err
						}
					}
				})
			}
			defer func() {
				close(queue)
				wg.Wait()
			}()
			commit := func(int) error {
				done := make(chan error, 1)
				queue <- done
				return <-done
			}
			rawInsert := func(w int) error {
				_, err := raw[w].Exec(ctx, `INSERT INTO raw_commits (v) VALUES ($1)`, "x")
				return err
			}
			inParallel(b, runs, 2, commit)
			inParallel(b, runs, 2, rawInsert)
			againstRaw(b, runs, per, commit, rawInsert)
		})
	}
}
