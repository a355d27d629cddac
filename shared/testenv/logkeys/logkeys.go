// Package logkeys checks JSON log records for keys held twice: encoding/json
// keeps the last of them silently, and so do most log stores, so a record
// with a key twice reads back as other than it was written.
package logkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// Once returns an error naming the first key that a JSON log record (one
// line) holds twice in one object, at any depth. A record that is not one
// JSON value is an error too.
func Once(record []byte) error {
	dec := json.NewDecoder(bytes.NewReader(record))
	dec.UseNumber()
	if err := once(dec, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more than one JSON value in the record")
	}
	return nil
}

// once reads one value from dec, checking the keys of each object in it;
// path is where it is, for the error.
func once(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("record is not JSON at %q: %w", path, err)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return fmt.Errorf("record is not JSON at %q: %w", path, err)
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("record has the key %q twice", path+key)
			}
			seen[key] = true
			if err := once(dec, path+key+"."); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := once(dec, fmt.Sprintf("%s%d.", path, i)); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("record is not JSON at %q: %w", path, err)
	}
	return nil
}

// Check fails t for each line of a JSON log that is not a JSON object
// with each key once, and returns the records that are, decoded.
func Check(t testing.TB, log []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if err := Once(line); err != nil {
			t.Errorf("%v: %s", err, line)
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Errorf("record is not a JSON object: %s", line)
			continue
		}
		out = append(out, rec)
	}
	return out
}
