package report

import (
	"slices"
	"strings"
)

// matrix is counts laid out for reading: one row per cell, a column per
// count; where the targets agree a value is shown once, where they differ
// each target's value is shown, marked with whether the kernels explain
// it.
type matrix struct {
	Columns []string // titles
	Keys    []string // count keys, as Columns
	Rows    []matrixRow
}

type matrixRow struct {
	Cell   string
	Label  string        // the cell's code and title, for tables
	Values []matrixValue // as Columns
}

type matrixValue struct {
	Text string // the one value all targets share, grouped; "" where they differ or none has one
	// Parts are each target's value where they differ: "docker 3,005".
	Parts []string
	// Differs marks a difference nothing explains; Kernel one the kernels
	// explain (Why says how).
	Differs, Kernel bool
	Why             string
}

// Marked is the value as one line: the shared value, or each target's
// with its mark (✗ different work, † the kernels' doing).
func (v matrixValue) Marked() string {
	if len(v.Parts) == 0 {
		return v.Text
	}
	mark := "✗ "
	if v.Kernel {
		mark = "† "
	}
	return mark + strings.Join(v.Parts, " · ")
}

// countMatrix lays rows out as a matrix over keys (every key rows have,
// in order of first appearance when keys is nil).
func (r *Report) countMatrix(rows []CountRow, keys []string) matrix {
	if keys == nil {
		for _, c := range rows {
			if !slices.Contains(keys, c.Count) {
				keys = append(keys, c.Count)
			}
		}
		slices.Sort(keys)
	}
	m := matrix{Keys: keys}
	for _, k := range keys {
		title := CountTitle(k)
		if strings.HasPrefix(k, "fuseRequests.") {
			title = strings.TrimPrefix(title, "FUSE ") // the opcode alone
		}
		m.Columns = append(m.Columns, title)
	}
	why := map[string]string{}
	for _, d := range r.Differences {
		why[d.Cell+"\x00"+d.Count] = d.Why
	}
	names := r.TargetNames()
	byCell := map[string]map[string]CountRow{}
	for _, c := range rows {
		if byCell[c.Cell] == nil {
			byCell[c.Cell] = map[string]CountRow{}
		}
		byCell[c.Cell][c.Count] = c
	}
	for _, cell := range r.Cells {
		counts, ok := byCell[cell.Name]
		if !ok {
			continue
		}
		row := matrixRow{Cell: cell.Name, Label: r.CellLabel(cell.Name)}
		for _, k := range keys {
			c, ok := counts[k]
			var v matrixValue
			switch {
			case !ok:
				v.Text = "—"
			case !c.Differs:
				v.Text = sharedText(names, c.Values, k == "result")
			default:
				for i, n := range names {
					v.Parts = append(v.Parts, n+" "+grouped(c.Values[i]))
				}
				v.Why = why[c.Cell+"\x00"+c.Count]
				v.Kernel, v.Differs = v.Why != "", v.Why == ""
			}
			row.Values = append(row.Values, v)
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

// sharedText is a row's value the targets share, and with say, which
// targets do not support the cell: "pass (gvisor: not supported)" (the
// result column says it once for the row).
func sharedText(names, values []string, say bool) string {
	shared, without := NotSupported, []string{}
	for i, v := range values {
		if v == NotSupported {
			without = append(without, names[i])
		} else {
			shared = grouped(v)
		}
	}
	if !say || len(without) == 0 || len(without) == len(values) {
		return shared
	}
	return shared + " (" + strings.Join(without, ", ") + ": " + NotSupported + ")"
}

// countKeys are the summary counts, in order.
func countKeys() []string {
	keys := make([]string, len(countNames))
	for i, c := range countNames {
		keys[i] = c.key
	}
	return keys
}
