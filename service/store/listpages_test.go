package store_test

import (
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestListInstancesDeepPagesReadTheirIndexRange: a page in the middle of a long list of instances reads from the
// cursor on, on MySQL, for each filter whose index ends in the id — not every index entry newer than the cursor
// (MariaDB read such an index by its equality prefix alone: a page of 20 in the middle of 20,000 instances read
// thousands of entries and their rows). Checked by EXPLAIN and by the rows the page's statement read.
func TestListInstancesDeepPagesReadTheirIndexRange(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	seed(t, s, "instances", 20000, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) // ids inst-00000…; 5 statuses, 20 templates, 40 initiators
	if err := s.DB().Exec("ANALYZE TABLE instances").Error; err != nil {
		t.Fatal(err)
	}
	page := model.Page{Limit: 20, Cursor: "inst-10000"}
	for _, c := range []struct {
		name string
		f    model.InstanceFilter
		key  string
	}{
		{"status", model.InstanceFilter{Status: "completed"}, "idx_instances_status"},
		{"template", model.InstanceFilter{Template: "tkey-3"}, "idx_instances_template"},
		{"initiator", model.InstanceFilter{Initiator: "initiator-7"}, "idx_instances_initiator"},
		{"status and template", model.InstanceFilter{Status: "completed", Template: "tkey-4"}, "idx_instances_template"},
	} {
		c.f.TenantID, c.f.Page = model.DefaultTenant, page
		q := s.ListInstancesSQL(c.f)
		typ, key := explain(t, s, q)
		if typ != "range" || key != c.key {
			t.Errorf("%s: access %q through %s, want a range of %s\n  %s", c.name, typ, key, c.key, q)
		}
		// The rows the statement read, on one connection: about a page, not the thousands before the cursor.
		var read int64
		err := s.DB().Connection(func(tx *gorm.DB) error {
			if err := tx.Exec("FLUSH STATUS").Error; err != nil {
				return err
			}
			var got []map[string]any
			if err := tx.Raw(q).Scan(&got).Error; err != nil {
				return err
			}
			if len(got) == 0 || fmt.Sprint(got[0]["id"]) >= page.Cursor {
				t.Errorf("%s: %d rows, want ids older than %s", c.name, len(got), page.Cursor)
			}
			var err error
			read, err = entriesRead(tx)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if read > 1000 {
			t.Errorf("%s: a page of %d read %d index entries", c.name, page.Limit, read)
		}
		t.Logf("%-20s %-6s %-24s read %d", c.name, typ, key, read)
	}
}
