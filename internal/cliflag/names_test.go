package cliflag

import "testing"

func TestFloat32(t *testing.T) {
	var v float32
	if err := Float32(&v)("0.25"); err != nil || v != 0.25 {
		t.Errorf("0.25: %v, %v", v, err)
	}
	if err := Float32(&v)("x"); err == nil || v != 0.25 {
		t.Errorf("x: %v, %v; want an error and the value kept", v, err)
	}
}
