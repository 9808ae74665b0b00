// Package tbtest reads TensorBoard event files for tests. It is written
// from the format's definitions (TFRecord framing, the tensorflow.Event
// and Summary protos), not from package tensorboard's writer: its CRC-32C
// is computed bit by bit and its protobuf decoder is its own, so a
// mistake would have to be made twice to pass unseen.
package tbtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
)

// crc32cBitwise is CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
func crc32cBitwise(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0x82F63B78
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}

func masked(c uint32) uint32 { return ((c >> 15) | (c << 17)) + 0xa282ead8 }

// Event is one event of a file.
type Event struct {
	WallTime float64
	Step     int64
	Version  string // file_version, set on a file's first event
	Values   map[string]float32
}

// fields decodes one protobuf message into (field, wire type, value)
// triples: varints and fixed values as uint64, bytes as []byte.
func fields(b []byte) ([][3]any, error) {
	var out [][3]any
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad key")
		}
		b = b[n:]
		field, wire := int(key>>3), int(key&7)
		switch wire {
		case 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return nil, errors.New("bad varint")
			}
			b = b[n:]
			out = append(out, [3]any{field, wire, v})
		case 1:
			if len(b) < 8 {
				return nil, errors.New("short fixed64")
			}
			out = append(out, [3]any{field, wire, binary.LittleEndian.Uint64(b)})
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return nil, errors.New("short fixed32")
			}
			out = append(out, [3]any{field, wire, uint64(binary.LittleEndian.Uint32(b))})
			b = b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, errors.New("bad length")
			}
			out = append(out, [3]any{field, wire, b[n : n+int(l)]})
			b = b[n+int(l):]
		default:
			return nil, fmt.Errorf("wire type %d", wire)
		}
	}
	return out, nil
}

// ReadEvents reads every event of an event file.
func ReadEvents(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Event
	for len(data) > 0 {
		if len(data) < 12 {
			return nil, errors.New("truncated record header")
		}
		n := binary.LittleEndian.Uint64(data)
		if got, want := binary.LittleEndian.Uint32(data[8:]), masked(crc32cBitwise(data[:8])); got != want {
			return nil, fmt.Errorf("length crc %x, want %x", got, want)
		}
		if uint64(len(data)) < 16+n {
			return nil, errors.New("truncated record")
		}
		rec := data[12 : 12+n]
		if got, want := binary.LittleEndian.Uint32(data[12+n:]), masked(crc32cBitwise(rec)); got != want {
			return nil, fmt.Errorf("data crc %x, want %x", got, want)
		}
		data = data[16+n:]
		fs, err := fields(rec)
		if err != nil {
			return nil, err
		}
		ev := Event{Values: map[string]float32{}}
		for _, f := range fs {
			switch f[0].(int) {
			case 1:
				ev.WallTime = math.Float64frombits(f[2].(uint64))
			case 2:
				ev.Step = int64(f[2].(uint64))
			case 3:
				ev.Version = string(f[2].([]byte))
			case 5:
				vals, err := fields(f[2].([]byte))
				if err != nil {
					return nil, err
				}
				for _, v := range vals {
					parts, err := fields(v[2].([]byte))
					if err != nil {
						return nil, err
					}
					var tag string
					var val float32
					for _, p := range parts {
						switch p[0].(int) {
						case 1:
							tag = string(p[2].([]byte))
						case 2:
							val = math.Float32frombits(uint32(p[2].(uint64)))
						}
					}
					ev.Values[tag] = val
				}
			}
		}
		out = append(out, ev)
	}
	return out, nil
}
