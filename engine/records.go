package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ReadRecords calls f with each record of the episode-record JSONL files
// at paths, in order, one record in memory at a time. A corrupt line is an
// error naming its file and line; so is an error f returns.
func ReadRecords(paths []string, f func(*Record) error) error {
	for _, path := range paths {
		if err := readRecordFile(path, f); err != nil {
			return err
		}
	}
	return nil
}

func readRecordFile(path string, f func(*Record) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<20)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if strings.TrimSpace(string(b)) != "" {
			var rec Record
			if jerr := json.Unmarshal(b, &rec); jerr != nil {
				return fmt.Errorf("%s:%d: %w", path, line, jerr)
			}
			if ferr := f(&rec); ferr != nil {
				return fmt.Errorf("%s:%d: %w", path, line, ferr)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// LoadRecords reads every record of the files at paths into memory.
func LoadRecords(paths ...string) ([]*Record, error) {
	var recs []*Record
	err := ReadRecords(paths, func(r *Record) error { recs = append(recs, r); return nil })
	return recs, err
}
