package locker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/locker"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		opts    []locker.Option
		wantErr string // substring of the error; "" for success
		want    locker.Options
	}{
		{name: "defaults", key: "k", want: locker.Options{TTL: locker.DefaultTTL, MaxHold: locker.DefaultMaxHoldFactor * locker.DefaultTTL}},
		{name: "ttl", key: "k", opts: []locker.Option{locker.WithTTL(time.Second), locker.WithAutoExtend(true)},
			want: locker.Options{TTL: time.Second, AutoExtend: true, MaxHold: locker.DefaultMaxHoldFactor * time.Second}},
		{name: "max hold", key: "k", opts: []locker.Option{locker.WithMaxHold(time.Minute)},
			want: locker.Options{TTL: locker.DefaultTTL, MaxHold: time.Minute}},
		{name: "nil option ignored", key: "k", opts: []locker.Option{nil},
			want: locker.Options{TTL: locker.DefaultTTL, MaxHold: locker.DefaultMaxHoldFactor * locker.DefaultTTL}},
		{name: "empty key", key: "", wantErr: "empty key"},
		{name: "zero ttl", key: "k", opts: []locker.Option{locker.WithTTL(0)}, wantErr: "TTL 0s"},
		{name: "negative ttl", key: "k", opts: []locker.Option{locker.WithTTL(-time.Second)}, wantErr: "TTL -1s"},
		{name: "negative max hold", key: "k", opts: []locker.Option{locker.WithMaxHold(-time.Second)}, wantErr: "max hold -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := locker.Resolve(tt.key, tt.opts...)
			if tt.wantErr != "" {
				if !errors.Is(err, locker.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve error = %v, want ErrInvalid mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got.Retry == nil {
				t.Fatal("Resolve left Retry nil")
			}
			got.Retry = nil
			if got != tt.want {
				t.Fatalf("Resolve = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNodeError(t *testing.T) {
	cause := errors.New("connection refused")
	err := errors.Join(&locker.NodeError{Node: "127.0.0.1:7001", Err: cause})
	if !errors.Is(err, locker.ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("NodeError does not unwrap to ErrUnavailable and its cause: %v", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:7001") {
		t.Fatalf("NodeError %q does not name the node", err)
	}
}
