package api

import (
	"bytes"
	"fmt"
	"strings"
)

const nbsp = "\u00a0"

// replaceNBSPIndentation turns non-breaking spaces (U+00A0) at the start and at
// the end of lines into plain spaces. Web pages indent code with them, and
// YAML copied from such a page would otherwise not parse (YAML does not treat
// U+00A0 as white space). It returns the 1-based numbers of the lines changed.
func replaceNBSPIndentation(data []byte) ([]byte, []int) {
	if !bytes.Contains(data, []byte(nbsp)) {
		return data, nil
	}
	lines := strings.SplitAfter(string(data), "\n")
	var changed []int
	for i, line := range lines {
		body, eol := strings.CutSuffix(line, "\n")
		body, cr := strings.CutSuffix(body, "\r")
		content := strings.Trim(body, " \t"+nbsp)
		if !strings.Contains(body, nbsp) {
			continue
		}
		start := strings.Index(body, content)
		if content == "" {
			start = len(body)
		}
		lead, trail := body[:start], body[start+len(content):]
		if !strings.Contains(lead, nbsp) && !strings.Contains(trail, nbsp) {
			continue
		}
		fixed := strings.ReplaceAll(lead, nbsp, " ") + content + strings.ReplaceAll(trail, nbsp, " ")
		if cr {
			fixed += "\r"
		}
		if eol {
			fixed += "\n"
		}
		lines[i] = fixed
		changed = append(changed, i+1)
	}
	return []byte(strings.Join(lines, "")), changed
}

// lineRanges renders sorted line numbers compactly: "3, 5-9".
func lineRanges(lines []int) string {
	var parts []string
	for i := 0; i < len(lines); {
		j := i
		for j+1 < len(lines) && lines[j+1] == lines[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(lines[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", lines[i], lines[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
